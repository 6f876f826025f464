"""From /mcp's 401 to a tool call with an OAuth token, as an MCP client does it: the challenge
names the protected-resource metadata, that names the authorization server, the client registers,
the user signs in and consents, and the SDK client calls tools with the token until the user
revokes the grant (docs/oauth.md)."""

from __future__ import annotations

import re

import httpx
import pytest
from sqlalchemy import text

from tests.api.helpers import login, make_login_user
from tests.mcp.helpers import run


def test_mcp_client_connects_with_an_oauth_token(oauth_client, base, committed):
    r = httpx.post(
        base + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"},
    )
    assert r.status_code == 401
    prm_url = re.search(r'resource_metadata="([^"]+)"', r.headers["www-authenticate"]).group(1)
    assert prm_url == base + "/.well-known/oauth-protected-resource/mcp"
    assert httpx.get(prm_url).json()["resource"] == oauth_client.resource == base + "/mcp"

    user = make_login_user(committed)
    oauth_client.register()
    t = oauth_client.tokens(user.email, user.password)

    async def go(c):
        tools = await c.list_tools()
        listed = await c.call_tool("kb_list_workspaces", {})
        return {tool.name for tool in tools.tools}, listed

    # the token exchange stamped the grant's last use; clear it to see the /mcp calls stamp it
    with committed() as s:
        s.execute(text("UPDATE mcp_oauth_grants SET last_used_at = NULL WHERE user_id = :u"), {"u": user.user_id})
        s.commit()
    names, listed = run(base, t["access_token"], go)
    assert "kb_search" in names and "kb_upsert_document" not in names  # no doc:write was granted
    assert not listed.is_error

    with login(base, user.email) as me:
        [item] = me.get("/api/me/oauth-grants").json()["items"]
        assert item["last_used_at"] is not None  # what the user's connected applications show
        gid = item["id"]
        assert me.delete(f"/api/me/oauth-grants/{gid}").status_code == 204
    with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the 401 as its own error types
        run(base, t["access_token"], go)
    r = httpx.post(
        base + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
            "Authorization": f"Bearer {t['access_token']}",
        },
    )
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]


class _Memory:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens) -> None:
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info) -> None:
        self.client_info = client_info


def test_the_sdk_oauth_client_connects_on_its_own(base, committed):
    """The SDK's own OAuth client (what many MCP clients embed): 401 -> PRM -> AS metadata (issuer
    checked) -> DCR -> authorize (our pages, driven like a browser) -> iss and state checked ->
    token with PKCE and resource -> tool calls."""
    import asyncio

    import httpx2
    from mcp import Client
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

    from tests.oauth.conftest import hidden_fields, redirect_params

    user = make_login_user(committed)
    browser = httpx.Client(timeout=30, follow_redirects=False)
    seen: dict[str, str] = {}

    async def redirect_handler(url: str) -> None:
        seen["authorize_url"] = url
        page = browser.get(url)
        page = browser.post(
            base + "/oauth/authorize", data={**hidden_fields(page.text), "email": user.email, "password": user.password}
        )
        assert page.status_code == 200 and 'value="allow"' in page.text, page.text[:300]
        seen.update(
            redirect_params(
                browser.post(base + "/oauth/authorize", data={**hidden_fields(page.text), "action": "allow"})
            )
        )

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=seen["code"], state=seen.get("state"), iss=seen.get("iss"))

    storage = _Memory()
    provider = OAuthClientProvider(
        server_url=base + "/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="SDK client",
            redirect_uris=["http://127.0.0.1:43123/cb"],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )

    async def go():
        http = httpx2.AsyncClient(auth=provider, timeout=60)
        async with http, Client(streamable_http_client(base + "/mcp", http_client=http)) as c:
            tools = await c.list_tools()
            listed = await c.call_tool("kb_list_workspaces", {})
            return {t.name for t in tools.tools}, listed

    try:
        names, listed = asyncio.run(go())
    finally:
        browser.close()
    assert "kb_search" in names and not listed.is_error
    assert "resource=" in seen["authorize_url"] and "code_challenge_method=S256" in seen["authorize_url"]
    assert storage.tokens.access_token.startswith("kbat_") and storage.tokens.refresh_token.startswith("kbrt_")
    assert storage.client_info.client_id.startswith("kbcl_")
