"""``/mcp``: OpenKB's MCP server over Streamable HTTP (docs/mcp.md).

``mount(app, ctx)`` builds the SDK server (``server/mcp/server.py``), puts the gate
(``server/mcp/http.py``: host, bearer token, scopes) in front of the SDK's handler at exactly
``/mcp`` and hands the session manager's ``run()`` to the app lifespan (a mounted Starlette app's
own lifespan never runs). Stateless mode: every POST is served on its own, so any API replica can
answer any request; clients of the 2025-11-25 era still initialize (they get no session id) and
2026-07-28 clients send no handshake at all. JSON responses, no SSE streams.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route

from openkb.context import AppContext
from openkb.errors import InsufficientScope, MisdirectedRequest, PayloadTooLarge, Unauthenticated
from server.mcp.http import MCP_PATH, McpGate, allowed_hosts
from server.mcp.server import build


def mount(app: FastAPI, ctx: AppContext) -> None:
    # The stateless transport logs "Terminating session: None" at INFO on every request.
    logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)
    srv = build(ctx)
    hosts = allowed_hosts(ctx)
    srv.streamable_http_app(  # creates the session manager; its Starlette app is not used
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        max_request_body_size=ctx.settings.json_body_limit,
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=hosts,
            allowed_origins=[ctx.settings.app_base_url.rstrip("/")]
            + [f"http://{h}" for h in hosts if h.endswith(":*")]
            + [f"https://{h}" for h in hosts if h.endswith(":*")],
        ),
    )
    gate = McpGate(ctx, StreamableHTTPASGIApp(srv.session_manager))
    app.router.routes.append(Route(MCP_PATH, endpoint=gate, include_in_schema=False))
    app.state.mcp_lifespan = srv.session_manager.run
    app.state.mcp = srv


def openapi_path() -> dict[str, Any]:
    """``/mcp`` in ``/api/openapi.json``: the SDK's route is not a FastAPI route, yet its gate
    answers OpenKB's error shape with stable codes a client (and tests/test_errors_catalogue.py)
    should find documented. The JSON-RPC messages themselves are MCP's (docs/mcp.md)."""
    codes = {
        "401": [Unauthenticated.code],
        "403": [InsufficientScope.code],
        "405": ["METHOD_NOT_ALLOWED"],
        "413": [PayloadTooLarge.code],
        "421": [MisdirectedRequest.code],
    }
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    rpc_error = {"application/json": {"schema": {"type": "object", "required": ["jsonrpc", "error"]}}}
    return {
        "post": {
            "tags": ["mcp"],
            "summary": "MCP over Streamable HTTP (stateless, JSON responses)",
            "description": "JSON-RPC 2.0 messages of the Model Context Protocol, bound to the user of the "
            "bearer token (an OAuth access token or a kbpat_ personal token). See docs/mcp.md.",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}},
            "responses": {
                "200": {"description": "the JSON-RPC response", "content": {"application/json": {"schema": {}}}},
                "202": {"description": "a notification or response was accepted"},
                # answered by the MCP SDK in JSON-RPC's error shape, not OpenKB's
                "400": {"description": "not a JSON-RPC message (JSON-RPC error object)", "content": rpc_error},
                "406": {"description": "the Accept header allows no JSON response (JSON-RPC error object)"},
                "415": {"description": "the body is not application/json (JSON-RPC error object)"},
                **{
                    status: {"description": ", ".join(c), "content": error, "x-error-codes": c}
                    for status, c in codes.items()
                },
            },
        }
    }
