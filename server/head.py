"""HEAD is answered as GET without the body (RFC 9110 §9.3.2; docs/api.md#conventions).

"All general-purpose servers MUST support the methods GET and HEAD", but a FastAPI route answers
only the methods it names, so every HEAD got 405: ``/healthz`` and ``/readyz`` for uptime
monitors that probe with HEAD, the web app's pages and files for link checkers and caches,
assets for a client asking a file's size (``curl -I``). The app sees a GET (the same
authentication, permission checks and headers, ``Content-Length``, ``ETag`` and ``Content-Range``
included), and the body is dropped here, so the answer does not depend on the server below
dropping it. A route with a HEAD of its own keeps it: an export's HEAD tells the size without
exporting or auditing anything (server/routers/export.py). Elsewhere a streamed answer runs to
its end, as the GET would: HEAD costs what GET costs and is no way around a check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    def __init__(self, app: ASGIApp, routes: Callable[[], Sequence[BaseRoute]]) -> None:
        self.app = app
        self.routes = routes  # the app's, read per request: routes are added after the middleware

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD" or self._own_head(scope):
            await self.app(scope, receive, send)
            return
        ended = False

        async def send_head(message: Message) -> None:
            nonlocal ended
            if message["type"] == "http.response.body":
                if ended or message.get("more_body", False):
                    return  # the body's bytes: never sent for a HEAD
                ended = True
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_head)

    def _own_head(self, scope: Scope) -> bool:
        """Whether a route answers this HEAD itself (a mounted app matches whatever the method:
        it answers HEAD as it sees fit)."""
        return any(route.matches(scope)[0] is Match.FULL for route in self.routes())
