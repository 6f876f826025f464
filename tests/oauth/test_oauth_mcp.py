"""From /mcp's 401 to a tool call with an OAuth token, as an MCP client does it: the challenge
names the protected-resource metadata, that names the authorization server, the client registers,
the user signs in and consents, and the SDK client calls tools with the token until the user
revokes the grant (docs/oauth.md)."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.api.helpers import login, make_login_user
from tests.mcp.helpers import run


def test_mcp_client_connects_with_an_oauth_token(oauth_client, base, committed):
    r = httpx.post(base + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                   headers={"Accept": "application/json, text/event-stream",
                            "MCP-Protocol-Version": "2025-11-25"})
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

    names, listed = run(base, t["access_token"], go)
    assert "kb_search" in names and "kb_upsert_document" not in names  # no doc:write was granted
    assert not listed.is_error

    with login(base, user.email) as me:
        gid = me.get("/api/me/oauth-grants").json()["items"][0]["id"]
        assert me.delete(f"/api/me/oauth-grants/{gid}").status_code == 204
    with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the 401 as its own error types
        run(base, t["access_token"], go)
    r = httpx.post(base + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                   headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25",
                            "Authorization": f"Bearer {t['access_token']}"})
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]
