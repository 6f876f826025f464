"""``Cache-Control: no-store`` on API answers that say nothing of caching (docs/web.md#security).

What the API answers is the caller's: their account and its CSRF token (``/api/me``), a token
shown once (``POST /api/me/tokens``), private pages and search results. With no caching header
a browser may keep it in its disk cache and a shared cache (a misconfigured proxy) may serve it
to someone else. Routes that choose their own caching keep it (assets: ``private, max-age``
with an ETag; exports and OAuth answers: ``no-store`` already); the web app's pages and static
files are outside these paths and set their own.

A pure ASGI middleware, so it sees every answer under these paths, errors included.
"""

from __future__ import annotations

from typing import Any

NO_STORE = b"no-store"
PREFIXES = ("/api/", "/mcp", "/retrieval")


class NoStoreByDefault:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith(PREFIXES) or path.startswith("/api/docs"):
            await self.app(scope, receive, send)
            return

        async def send_no_store(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(k.lower() == b"cache-control" for k, _ in headers):
                    headers.append((b"cache-control", NO_STORE))
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_no_store)
