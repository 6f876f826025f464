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


def test_admin_activates_an_unverified_sign_up_and_has_no_button_for_themself(contexts, live_server, committed):
    """A sign-up whose verification mail never arrived is activated from the console (the admin
    vouches for the address, as ``openkb user activate`` does); the admin's own row offers no
    action, since the server refuses every one of them on oneself."""
    admin = make_login_user(committed, role="tenant_admin")
    waiting = make_login_user(committed, status="pending_email_verification")
    page = contexts.page()
    sign_in(page, admin.email)
    page.goto("/admin/users")
    page.get_by_role("searchbox", name="Email or name").fill(waiting.email)
    page.get_by_role("button", name="Search").click()
    row = page.get_by_role("row").filter(has_text=waiting.email)
    row.get_by_role("button", name=f"Activate {waiting.email}").click()
    expect(row.get_by_role("cell", name="active", exact=True)).to_be_visible()
    with httpx.Client(base_url=live_server) as c:
        r = c.post("/api/auth/login", json={"email": waiting.email, "password": waiting.password})
        assert r.status_code == 200, r.text
    page.get_by_role("searchbox", name="Email or name").fill(admin.email)
    page.get_by_role("button", name="Search").click()
    mine = page.get_by_role("row").filter(has_text=admin.email)
    expect(mine.get_by_text("(you)")).to_be_visible()
    expect(mine.get_by_role("button")).to_have_count(0)


@pytest.mark.parametrize("tab", ["users", "registration", "audit", "imports", "index", "dify", "mcp", "groups"])
def test_the_console_fits_a_phone(contexts, live_server, committed, tab):
    """At 390 px wide no console tab makes the page scroll sideways: wide tables scroll inside
    themselves, the tabs wrap, a long collection name breaks, and a profile name of the longest
    allowed length fits the new profile form's list of profiles to copy."""
    if tab == "index":
        from openkb.indexing.profiles import insert_profile
        from openkb.indexing.profiles_spec import make_profile

        with committed() as s:
            version = 5000 + uuid.uuid4().int % 4000
            insert_profile(s, make_profile(model_name=None, dim=0, version=version, name=f"p{version}".ljust(63, "x")))
            s.commit()
    admin = make_login_user(committed, role="tenant_admin")
    ctx = contexts.browser.new_context(base_url=live_server, viewport={"width": 390, "height": 844})
    contexts.opened.append(ctx)
    page = ctx.new_page()
    contexts.watch(page)
    sign_in(page, admin.email)
    page.goto(f"/admin/{tab}")
    expect(page.get_by_role("heading", level=2).first).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
