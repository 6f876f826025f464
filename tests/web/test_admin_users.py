"""The console's users tab deletes a user (docs/accounts.md#deleting-a-user): the admin confirms,
is told the user owns content and names a successor by email; the row then reads deleted, the
successor owns the workspace and the deleted user cannot sign in."""

from __future__ import annotations

import uuid

import httpx
import pytest
from playwright.sync_api import expect

from openkb.bootstrap import DEFAULT_TENANT_SLUG
from tests.api.helpers import login, make_login_user
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.slow


def test_admin_deletes_a_user_and_names_a_successor(contexts, live_server, committed):
    admin, leaver, heir = (
        make_login_user(committed, role="tenant_admin"),
        make_login_user(committed),
        make_login_user(committed),
    )
    with login(live_server, leaver.email) as c:
        ws = c.post("/api/workspaces", json={"name": f"Leaver {uuid.uuid4().hex[:6]}"}).json()
    page = contexts.page()
    sign_in(page, admin.email)
    page.goto("/admin/users")
    dialogs: list[str] = []

    def answer(d) -> None:
        dialogs.append(d.type)
        d.accept(heir.email) if d.type == "prompt" else d.accept()

    page.on("dialog", answer)
    page.get_by_role("searchbox", name="Email or name").fill(leaver.email)
    page.get_by_role("button", name="Search").click()
    row = page.get_by_role("row").filter(has_text=leaver.email)
    expect(row).to_contain_text(DEFAULT_TENANT_SLUG)  # the membership's tenant, which the row acts on
    row.get_by_role("button", name=f"Delete {leaver.email}").click()
    # the list refreshes: the search no longer matches the anonymized address
    expect(page.get_by_role("row").filter(has_text=leaver.email)).to_have_count(0)
    assert dialogs == ["confirm", "prompt"]
    page.get_by_label("Status").select_option("deleted")
    page.get_by_role("searchbox", name="Email or name").fill(leaver.user_id.hex)
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("row").filter(has_text="Deleted user")).to_have_count(1)

    r = httpx.post(live_server + "/api/auth/login", json={"email": leaver.email, "password": leaver.password})
    assert r.status_code == 401
    with login(live_server, heir.email) as h:
        assert h.get(f"/api/workspaces/{ws['id']}").json()["role"] == "owner"
