"""The HTTP gate in front of the SDK's Streamable HTTP handler (docs/mcp.md#authorization).

In order, before the SDK sees the request:

1. ``Host`` must be APP_BASE_URL's host, a loopback name or one of ``MCP_ALLOWED_HOSTS``:
   anything else is 421 (DNS rebinding; a loopback ``Host`` cannot be forged by a rebinding page).
2. A bearer token (``kbpat_...`` or an OAuth access token for ``<APP_BASE_URL>/mcp``), checked
   against PostgreSQL on every request: none or a bad one is 401 with
   ``WWW-Authenticate: Bearer resource_metadata=..., scope=...`` (RFC 9728 discovery).
3. Scopes: a token with none of the MCP scopes, or a ``tools/call`` / ``resources/read`` whose
   scope it lacks, is 403 ``insufficient_scope`` naming the scope (a client can step up).
   The JSON-RPC body is peeked for the scope; the app-wide body cap (``server/body_limit.py``,
   413 before anything parses) has already bounded it.
4. POST only: anything else is 405 (stateless, so no GET stream to hold open and no session to
   DELETE).

The resolved caller goes to the tools through a context variable (the SDK copies the request's
context into the task that runs the tool). No state is kept between requests, so any replica
can answer any request.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openkb.context import AppContext
from openkb.db import session_scope
from openkb.errors import MisdirectedRequest, Unauthenticated
from openkb.mcp.caller import (
    READ_SCOPES,
    TOOL_SCOPES,
    McpCaller,
    has_any_mcp_scope,
    scope_for_resource,
    verify_bearer,
)

MCP_PATH = "/mcp"
PRM_PATH = "/.well-known/oauth-protected-resource/mcp"
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class McpRequest:
    caller: McpCaller
    ip: str | None
    user_agent: str | None


current: ContextVar[McpRequest | None] = ContextVar("openkb_mcp_request", default=None)


def resource_url(ctx: AppContext) -> str:
    """The canonical URL of this protected resource (what OAuth tokens are bound to, RFC 8707)."""
    return ctx.settings.app_base_url.rstrip("/") + MCP_PATH


def allowed_hosts(ctx: AppContext) -> list[str]:
    """``Host`` values /mcp accepts, for the SDK's transport security too (``host:*`` = any port)."""
    u = urlparse(ctx.settings.app_base_url)
    hosts = [u.netloc.lower()] if u.netloc else []
    if u.hostname and u.port is None:
        hosts.append(f"{u.hostname.lower()}:{443 if u.scheme == 'https' else 80}")
    hosts += [f"{h}:*" for h in LOOPBACK] + list(LOOPBACK)
    hosts += [h.strip().lower() for h in ctx.settings.mcp_allowed_hosts.split(",") if h.strip()]
    return hosts


def host_allowed(host: str | None, allowed: list[str]) -> bool:
    if not host:
        return False
    host = host.lower()
    return any(host == a or (a.endswith(":*") and host.startswith(a[:-1])) for a in allowed)


def _header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope["headers"]:
        if k == name:
            return v.decode("latin-1")
    return None


def _quote(text: str) -> str:
    return text.replace("\\", "").replace('"', "'")


async def _refuse(
    send: Send,
    status: int,
    code: str,
    detail: str,
    challenge: str | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = json.dumps({"error": code, "detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    if challenge:
        headers.append((b"www-authenticate", challenge.encode("latin-1", "replace")))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def needed_scope(body: bytes) -> str | None:
    """The scope a ``tools/call`` or ``resources/read`` message needs (None for other methods,
    unknown tools and bodies that are not JSON: the SDK answers those itself)."""
    try:
        msg = json.loads(body)
    except ValueError:
        return None
    if not isinstance(msg, dict) or not isinstance(msg.get("params"), dict):
        return None
    params: dict[str, Any] = msg["params"]
    if msg.get("method") == "tools/call" and isinstance(params.get("name"), str):
        return TOOL_SCOPES.get(params["name"])
    if msg.get("method") == "resources/read" and isinstance(params.get("uri"), str):
        return scope_for_resource(params["uri"])
    return None


async def _buffer(receive: Receive) -> tuple[bytes, Receive]:
    messages: list[Message] = []
    chunks: list[bytes] = []
    while True:
        msg = await receive()
        messages.append(msg)
        if msg["type"] != "http.request":
            break
        chunks.append(msg.get("body", b""))
        if not msg.get("more_body", False):
            break

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return b"".join(chunks), replay


class McpGate:
    """ASGI app: the checks above, then ``inner`` (the SDK's Streamable HTTP handler)."""

    def __init__(self, ctx: AppContext, inner: ASGIApp) -> None:
        self.ctx = ctx
        self.inner = inner

    def _verify(self, token: str) -> McpCaller:
        with session_scope(self.ctx.engine) as s:
            return verify_bearer(s, token, resource=resource_url(self.ctx))

    def challenge(
        self, *, error: str | None = None, description: str | None = None, scope: str = " ".join(READ_SCOPES)
    ) -> str:
        parts = []
        if error:
            parts.append(f'error="{error}"')
        if description:
            parts.append(f'error_description="{_quote(description)}"')
        parts.append(f'resource_metadata="{self.ctx.settings.app_base_url.rstrip("/")}{PRM_PATH}"')
        parts.append(f'scope="{scope}"')
        return "Bearer " + ", ".join(parts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        if not host_allowed(_header(scope, b"host"), allowed_hosts(self.ctx)):
            err = MisdirectedRequest("this host name is not served here (see APP_BASE_URL)")
            await _refuse(send, err.http_status, err.code, err.detail)
            return
        auth = _header(scope, b"authorization") or ""
        if auth[:7].lower() != "bearer " or not auth[7:].strip():
            await _refuse(
                send,
                401,
                "UNAUTHENTICATED",
                "send 'Authorization: Bearer <token>' (an OAuth access token or a kbpat_ personal token)",
                self.challenge(),
            )
            return
        try:
            caller = await anyio.to_thread.run_sync(self._verify, auth[7:].strip())
        except Unauthenticated as exc:
            await _refuse(
                send, 401, "UNAUTHENTICATED", exc.detail, self.challenge(error="invalid_token", description=exc.detail)
            )
            return
        if not has_any_mcp_scope(caller.scopes):
            detail = f"token lacks the MCP scopes ({' '.join(READ_SCOPES)})"
            await _refuse(
                send, 403, "INSUFFICIENT_SCOPE", detail, self.challenge(error="insufficient_scope", description=detail)
            )
            return
        if scope.get("method") != "POST":
            # Stateless: no session to resume and nothing to push, so no GET stream (it would hold
            # a connection and a server task open for nothing) and no DELETE; POST only.
            await _refuse(
                send,
                405,
                "METHOD_NOT_ALLOWED",
                "the MCP endpoint takes POST only (stateless)",
                extra=[(b"allow", b"POST")],
            )
            return
        body, receive = await _buffer(receive)
        need = needed_scope(body)
        if need is not None and not caller.may(need):
            detail = f"token lacks scope {need}"
            await _refuse(
                send,
                403,
                "INSUFFICIENT_SCOPE",
                detail,
                self.challenge(
                    error="insufficient_scope", description=detail, scope=" ".join(sorted(caller.scopes | {need}))
                ),
            )
            return
        client = scope.get("client")
        ua = _header(scope, b"user-agent")
        token = current.set(McpRequest(caller, client[0] if client else None, ua[:500] if ua else None))
        try:
            await self.inner(scope, receive, send)
        finally:
            current.reset(token)
