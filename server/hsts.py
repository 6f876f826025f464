"""``Strict-Transport-Security`` on every response when ``APP_BASE_URL`` is https (docs/web.md#security).

Once a browser has seen the header it goes to this host over https only, for a year, and never
lets a user click through a certificate warning; a network attacker can no longer strip TLS on
a first plain-http request (the session cookie is ``Secure`` then, but the login page itself
could be served tampered). Sent only for an https base URL: on an http one (a LAN appliance
without TLS, the tests) it would lock browsers out of the only address that works.

A pure ASGI middleware, outermost, so every answer carries it: API errors, the 500 of
``errors.RequestFrame``, static files, ``/mcp``. The setting is read per response (a test or an
operator may change ``APP_BASE_URL`` without rebuilding the app); ``includeSubDomains`` is left
out: other hosts under the same domain are not this appliance's to decide.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

HSTS_VALUE = "max-age=31536000"


class StrictTransportSecurity:
    """``base_url``: a callable returning the current ``APP_BASE_URL``."""

    def __init__(self, app: Any, *, base_url: Callable[[], str]) -> None:
        self.app = app
        self.base_url = base_url

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.base_url().strip().lower().startswith("https://"):
            await self.app(scope, receive, send)
            return

        async def send_with_hsts(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"strict-transport-security"]
                headers.append((b"strict-transport-security", HSTS_VALUE.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_hsts)
