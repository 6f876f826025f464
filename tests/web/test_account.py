"""My account (/app/account) in a real browser: a personal access token made on the page works on
/mcp, and fails there once revoked on the page; sessions and password change."""

from __future__ import annotations

import json

import httpx
import pytest
from playwright.sync_api import expect
from sqlmodel import select

from openkb.config import get_settings
from openkb.models import AuditLog
from tests.api.helpers import PASSWORD, login, make_login_user
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.slow


def _mcp_tools_list(base: str, token: str) -> httpx.Response:
    return httpx.post(
        base + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
        },
        timeout=30,
    )


def test_pat_from_the_account_page_works_on_mcp_until_revoked(contexts, live_server, committed):
    acct = make_login_user(committed)
    page = contexts.page()
    sign_in(page, acct.email)
    page.goto("/app/account")
    expect(page.get_by_role("heading", name="My account", level=1)).to_be_visible()

    page.get_by_role("button", name="New token").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Token name").fill("laptop mcp")
    dialog.get_by_role("button", name="Create").click()
    expect(dialog.get_by_role("status")).to_contain_text("shown only once")
    token = dialog.get_by_label("Token", exact=True).input_value()
    assert token.startswith("kbpat_")
    # the configuration offered with it is one a header-only client can use as it is: its
    # address is the server's (APP_BASE_URL), so the test sends the request to the live server
    dialog.get_by_text("Connect an MCP client with this token").click()
    cursor = json.loads(dialog.get_by_label("Cursor (mcp.json)", exact=True).input_value())["mcpServers"]["openkb"]
    vscode = json.loads(dialog.get_by_label("VS Code (.vscode/mcp.json)", exact=True).input_value())["servers"][
        "openkb"
    ]
    base_url = get_settings().app_base_url.rstrip("/")
    assert cursor["url"] == vscode["url"] == base_url + "/mcp"
    assert cursor["headers"] == vscode["headers"] == {"Authorization": f"Bearer {token}"}
    assert dialog.get_by_label("Claude Code", exact=True).input_value() == (
        f'claude mcp add --transport http openkb {base_url}/mcp --header "Authorization: Bearer {token}"'
    )
    listed = httpx.post(
        live_server + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Accept": "application/json, text/event-stream", **cursor["headers"]},
        timeout=30,
    )
    assert listed.status_code == 200 and listed.json()["result"]["tools"]
    dialog.get_by_role("button", name="Done").click()
    expect(page.get_by_role("cell", name="laptop mcp", exact=True)).to_be_visible()
    expect(page.get_by_role("textbox", name="MCP address")).to_have_value(base_url + "/mcp")

    assert _mcp_tools_list(live_server, token).status_code == 200

    page.once("dialog", lambda d: d.accept())  # the confirm() before revoking
    page.get_by_role("button", name="Revoke laptop mcp").click()
    expect(page.get_by_role("cell", name="revoked", exact=True)).to_be_visible()
    assert _mcp_tools_list(live_server, token).status_code == 401

    # the page never shows the secret again
    page.reload()
    expect(page.get_by_role("cell", name="laptop mcp", exact=True)).to_be_visible()
    assert token not in page.content()
    with committed() as s:
        acts = {r.action for r in s.exec(select(AuditLog).where(AuditLog.actor_user_id == acct.user_id))}
    assert {"pat.created", "pat.revoked"} <= acts


def test_sessions_and_password_change(contexts, live_server, committed):
    acct = make_login_user(committed)
    firefox = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0"
    elsewhere = login(live_server, acct.email, user_agent=firefox)  # another device
    page = contexts.page()
    sign_in(page, acct.email)
    page.goto("/app/account")
    sessions = page.get_by_role("table", name="Sessions")
    expect(sessions.get_by_role("row")).to_have_count(3)  # header + two sessions
    expect(sessions).to_contain_text("(this session)")
    # devices by the names people know them by; the stored User-Agent stays in the tooltip
    other = sessions.get_by_role("row").filter(has_text="Firefox 133 · Windows")
    expect(other).to_have_count(1)
    expect(other.get_by_role("cell").first).to_have_attribute("title", firefox)

    page.get_by_label("Current password").fill("not my password")
    page.get_by_label("New password").fill("a brand new password")
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("alert")).to_be_visible()
    assert elsewhere.get("/api/auth/me").status_code == 200

    page.get_by_label("Current password").fill(PASSWORD)
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("status")).to_contain_text("1 other session was signed out")
    expect(sessions.get_by_role("row")).to_have_count(2)
    assert elsewhere.get("/api/auth/me").status_code == 401
    elsewhere.close()
    with login(live_server, acct.email, "a brand new password") as c:
        assert c.get("/api/auth/me").status_code == 200
