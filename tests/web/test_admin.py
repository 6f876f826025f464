"""The admin console (/admin) in a real browser: who may open it, users, registration settings,
the audit log. Admin actions go through the same REST routes the CLI's admin commands mirror."""

from __future__ import annotations

import random

import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.api.helpers import PASSWORD, auth_settings_override, login, make_login_user, unique_email
from tests.api.test_mcp_admin_routes import _oauth_token, _tools
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.slow


def test_a_member_gets_the_not_found_page(contexts, committed):
    member = make_login_user(committed)
    page = contexts.page()
    sign_in(page, member.email)
    expect(page.get_by_role("link", name="Admin console")).to_have_count(0)
    page.goto("/admin/users")
    expect(page.get_by_role("heading", name="Not found.")).to_be_visible()
    expect(page.get_by_role("table")).to_have_count(0)


@pytest.mark.parametrize(
    ("path", "tab"),
    [
        ("/admin/auth-settings", "Registration"),
        ("/admin/audit-logs", "Audit log"),
        ("/admin/milvus", "Milvus & index"),
        ("/admin/milvus/rebuild-jobs", "Milvus & index"),
    ],
)
def test_the_console_routes_of_the_product_open_their_tabs(contexts, committed, path, tab):
    """The addresses the product's route list gives the console open the tab that holds them."""
    admin = make_login_user(committed, role="tenant_admin")
    if path.endswith("/rebuild-jobs"):  # a long profiles table above the rebuilds, as a busy install has
        from openkb.indexing.profiles import insert_profile
        from openkb.indexing.profiles_spec import make_profile

        with committed() as s:
            for version in random.sample(range(20_000, 40_000), 12):  # apart from other tests' versions
                insert_profile(s, make_profile(model_name=None, dim=0, version=version, name=f"many-{version}"))
            s.commit()
    page = contexts.page()
    sign_in(page, admin.email)
    page.goto(path)
    expect(page.get_by_role("navigation", name="Admin console").get_by_role("link", name=tab)).to_have_attribute(
        "aria-current", "page"
    )
    if path.endswith("/rebuild-jobs"):
        expect(page.get_by_role("heading", name="Rebuilds")).to_be_in_viewport()


def test_only_a_system_admin_may_tick_first_user_becomes_admin(contexts, committed):
    """The setting hands out system_admin: a tenant_admin sees it, greyed, with why; a
    system_admin changes it (docs/accounts.md#registration-settings)."""
    for role, enabled in (("tenant_admin", False), ("system_admin", True)):
        admin = make_login_user(committed, role=role)
        page = contexts.page()
        sign_in(page, admin.email)
        page.goto("/admin/auth-settings")
        box = page.get_by_label("The first user becomes administrator")
        expect(box).to_be_visible()
        if enabled:
            expect(box).to_be_enabled()
        else:
            expect(box).to_be_disabled()
            expect(box).to_have_attribute("title", "Only a system administrator changes this")
        expect(page.get_by_label("An invitation is required to register")).to_be_enabled()
        page.close()


def test_admin_activates_changes_registration_and_sees_the_audit_log(contexts, live_server, http, committed):
    admin = make_login_user(committed, role="tenant_admin")
    pending = make_login_user(committed, status="pending_activation")
    with auth_settings_override(committed, default_signup_status="active", email_verification_required=False):
        page = contexts.page()
        sign_in(page, admin.email)
        page.get_by_role("link", name="Admin console").click()
        expect(page.get_by_role("heading", name="Admin console")).to_be_visible()

        # users: search, activate; the user can sign in afterwards
        page.get_by_role("searchbox", name="Email or name").fill(pending.email)
        page.get_by_role("button", name="Search").click()
        row = page.get_by_role("row").filter(has_text=pending.email)
        expect(row).to_contain_text("awaiting activation")
        row.get_by_role("button", name=f"Activate {pending.email}").click()
        expect(row).to_contain_text("active")
        expect(row.get_by_role("button", name=f"Suspend {pending.email}")).to_be_visible()
        with login(live_server, pending.email) as c:
            assert c.get("/api/auth/me").status_code == 200
        page.once("dialog", lambda d: d.accept())
        row.get_by_role("button", name=f"Make {pending.email} tenant admin").click()
        expect(row.get_by_role("button", name=f"Make {pending.email} a member")).to_be_visible()
        with login(live_server, pending.email) as c:
            assert c.get("/api/admin/users").status_code == 200

        # registration settings: new accounts wait for activation; a registration sees it
        page.get_by_role("link", name="Registration").click()
        expect(page.get_by_text("override the instance default")).to_be_visible()
        page.get_by_label("Status of a new account").select_option("pending_activation")
        page.get_by_role("button", name="Save", exact=True).click()
        expect(page.get_by_role("status")).to_have_text("Saved")
        newcomer = unique_email("newcomer")
        r = http.post("/api/auth/register", json={"email": newcomer, "password": PASSWORD})
        assert r.status_code == 201, r.text
        assert r.json()["user"]["status"] == "pending_activation"

        page.get_by_role("link", name="Users").click()
        page.get_by_label("Status").select_option("pending_activation")
        expect(page.get_by_role("row").filter(has_text=newcomer)).to_be_visible()

        # the audit log shows both actions, filtered server-side
        page.get_by_role("link", name="Audit log").click()
        page.get_by_label("Actor (email or user id)").fill(admin.email)
        page.get_by_role("button", name="Filter").click()
        table = page.get_by_role("table", name="Audit log")
        expect(table.get_by_role("row").filter(has_text="user.activated")).to_have_count(1)
        expect(table.get_by_role("row").filter(has_text="auth_settings.updated")).to_have_count(1)
        expect(table.get_by_role("row").filter(has_text="user.role_changed")).to_have_count(1)
        with page.expect_download() as dl:
            page.get_by_role("button", name="Export CSV").click()
        csv = open(dl.value.path(), encoding="utf-8").read()
        assert csv.startswith("created_at,actor_type,actor_user_id,actor_email,action")
        assert re.search(r"user\.activated", csv) and "auth_settings.updated" in csv


def test_a_dify_key_from_the_console_works_on_retrieval_until_revoked(contexts, live_server, committed, app_ctx):
    admin = make_login_user(committed, role="tenant_admin")
    with login(live_server, admin.email) as c:
        ws = c.post("/api/workspaces", json={"name": "Dify team"}).json()
        kb = c.post("/api/knowledge-bases", json={"workspace_id": ws["id"], "title": "For Dify"}).json()
    page = contexts.page()
    sign_in(page, admin.email)
    page.goto("/admin/dify")
    expect(page.get_by_label("Endpoint to paste into Dify:")).to_have_value(app_ctx.settings.app_base_url.rstrip("/"))

    kid = f"dify-{kb['id'][:8]}"
    mapping = page.get_by_role("form", name="Map")
    mapping.get_by_label("Dify knowledge id").fill(kid)
    mapping.get_by_label("Knowledge base (id or slug)").fill(kb["id"])
    mapping.get_by_role("button", name="Map").click()
    expect(
        page.get_by_role("table", name="Knowledge id mappings").get_by_role("row").filter(has_text=kid)
    ).to_be_visible()

    create = page.get_by_role("form", name="Create key")
    create.get_by_label("Key name").fill("dify prod")
    create.get_by_label("Knowledge bases (ids or slugs)").fill(kb["id"])
    create.get_by_label("Top-k limit").fill("5")
    create.get_by_role("button", name="Create key").click()
    key = page.get_by_label("Dify API key").input_value()
    assert key.startswith("okdify_")
    page.get_by_role("button", name="Done").click()
    expect(page.get_by_label("Dify API key")).to_have_count(0)  # shown once

    ask = {"knowledge_id": kid, "query": "anything", "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}}
    headers = {"Authorization": f"Bearer {key}"}
    r = httpx.post(live_server + "/retrieval", json=ask, headers=headers, timeout=30)
    assert r.status_code == 200 and isinstance(r.json()["records"], list), r.text

    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Revoke dify prod").click()
    row = page.get_by_role("table", name="API keys").get_by_role("row").filter(has_text="dify prod")
    expect(row.get_by_role("cell", name="revoked", exact=True)).to_be_visible()
    r = httpx.post(live_server + "/retrieval", json=ask, headers=headers, timeout=30)
    assert r.status_code == 403 and r.json()["error_code"] == 1002
    page.get_by_label("Language").select_option("zh-CN")  # states are words of the interface, not API values
    row = page.get_by_role("row").filter(has_text="dify prod")  # the table's name is Chinese now too
    expect(row.get_by_role("cell", name="已撤销", exact=True)).to_be_visible()


def test_admin_disables_an_mcp_client_and_revokes_a_grant(contexts, live_server, committed, app_ctx):
    # A registered client serves every tenant: the system_admin switches it (docs/oauth.md#administration).
    admin, user = make_login_user(committed, role="system_admin"), make_login_user(committed)
    token, _, _ = _oauth_token(committed, user.user_id, app_ctx.settings.app_base_url.rstrip("/") + "/mcp")
    page = contexts.page()
    sign_in(page, admin.email)
    page.goto("/admin/mcp")
    client = (
        page.get_by_role("table", name="Registered OAuth clients").get_by_role("row").filter(has_text="Admin-view IDE")
    )
    expect(client.first).to_be_visible()
    assert _tools(live_server, token) == 200
    client.first.get_by_role("button", name="Disable Admin-view IDE").click()
    expect(client.first.get_by_role("button", name="Enable Admin-view IDE")).to_be_visible()
    assert _tools(live_server, token) == 401
    client.first.get_by_role("button", name="Enable Admin-view IDE").click()
    expect(client.first.get_by_role("button", name="Disable Admin-view IDE")).to_be_visible()
    assert _tools(live_server, token) == 200
    grant = page.get_by_role("table", name="Active authorizations").get_by_role("row").filter(has_text=user.email)
    page.once("dialog", lambda d: d.accept())
    grant.get_by_role("button", name="Revoke").click()
    expect(grant).to_have_count(0)
    assert _tools(live_server, token) == 401
