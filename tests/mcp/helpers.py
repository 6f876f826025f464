"""An MCP client for the live test server: the SDK's own ``mcp.Client`` over Streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

T = TypeVar("T")
LEGACY, MODERN = "legacy", "2026-07-28"


@contextlib.asynccontextmanager
async def mcp_client(base: str, token: str, mode: str = LEGACY) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http, Client(streamable_http_client(base + "/mcp", http_client=http), mode=mode) as c:
        yield c


def run(base: str, token: str, fn: Callable[[Client], Awaitable[T]], mode: str = LEGACY) -> T:
    """``fn(client)`` on a fresh connection, from synchronous test code."""

    async def go() -> T:
        async with mcp_client(base, token, mode) as c:
            return await fn(c)

    return asyncio.run(go())


def token_of(client: Any) -> str:
    """The bearer token of an ``HttpWorld`` persona's httpx client."""
    return str(client.headers["Authorization"]).split(" ", 1)[1]
