"""The admin console (/admin) in a real browser: who may open it, users, registration settings,
the audit log. Admin actions go through the same REST routes the CLI's admin commands mirror."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.api.helpers import PASSWORD, auth_settings_override, login, make_login_user, unique_email
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

        # registration settings: new accounts wait for activation; a registration sees it
        page.get_by_role("link", name="Registration").click()
        expect(page.get_by_text("override the instance default")).to_be_visible()
        page.get_by_label("Status of a new account").select_option("pending_activation")
        page.get_by_role("button", name="Save").click()
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
        page.get_by_label("Actor (user id)").fill(str(admin.user_id))
        page.get_by_role("button", name="Filter").click()
        table = page.get_by_role("table", name="Audit log")
        expect(table.get_by_role("row").filter(has_text="user.activated")).to_have_count(1)
        expect(table.get_by_role("row").filter(has_text="auth_settings.updated")).to_have_count(1)
        with page.expect_download() as dl:
            page.get_by_role("button", name="Export CSV").click()
        csv = open(dl.value.path(), encoding="utf-8").read()
        assert csv.startswith("created_at,actor_type,actor_user_id,action")
        assert re.search(r"user\.activated", csv) and "auth_settings.updated" in csv
