"""Workspace and knowledge base settings, ownership: the owner hands the workspace to a member (confirmed; the old
owner stays as admin and loses the ownership section), the new owner deletes it after typing
its name; a workspace with pages is refused with the counts."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from tests.api.helpers import login, make_login_user
from tests.web.test_browser import new_page, sign_in

pytestmark = pytest.mark.slow


def test_transfer_ownership_then_delete(contexts, live_server, committed):
    owner, heir = make_login_user(committed), make_login_user(committed)
    name = f"Handover {uuid.uuid4().hex[:6]}"
    with login(live_server, owner.email) as c:
        ws = c.post("/api/workspaces", json={"name": name}).json()
        kb = c.post("/api/knowledge-bases", json={"workspace_id": ws["id"], "title": "Notes"}).json()
        doc = new_page(c, kb["id"], "Left over", "# Left over\n")
        r = c.post(f"/api/workspaces/{ws['id']}/members", json={"email": heir.email, "role": "member"})
        assert r.status_code == 201, r.text

    page = contexts.page()
    sign_in(page, owner.email)
    page.goto(f"/app/workspaces/{ws['id']}/settings")
    page.once("dialog", lambda d: d.accept())
    page.get_by_label("New owner").select_option(label=f"{heir.email.split('@')[0]} <{heir.email}>")
    page.get_by_role("button", name="Transfer ownership").click()
    expect(page.get_by_role("heading", name="Ownership")).to_have_count(0)  # an admin now
    members = page.get_by_role("table", name="Members")
    expect(members.get_by_role("row").filter(has_text=heir.email)).to_contain_text("Owner")

    other = contexts.page()
    sign_in(other, heir.email)
    other.goto(f"/app/workspaces/{ws['id']}/settings")
    other.once("dialog", lambda d: d.accept(name))
    # wait for the refusal itself: on a loaded machine the round trip can outlast expect's 5 s
    with other.expect_response(
        lambda r: r.request.method == "DELETE" and f"/api/workspaces/{ws['id']}" in r.url
    ) as refused:
        other.get_by_role("button", name="Delete workspace").click()
    assert refused.value.status == 409
    expect(other.get_by_role("alert")).to_contain_text(
        "its 1 knowledge base still holds 1 page or folder, counting the trash. Empty it first."
    )
    with login(live_server, owner.email) as c:  # the knowledge base's owner (private: the heir can't see it)
        assert c.delete(f"/api/documents/{doc['id']}").status_code in (200, 204)
        assert c.delete(f"/api/trash/{doc['id']}").status_code == 200
    other.once("dialog", lambda d: d.accept(name))
    other.get_by_role("button", name="Delete workspace").click()
    expect(other).to_have_url(f"{live_server}/app")
    with login(live_server, heir.email) as c:
        assert c.get(f"/api/workspaces/{ws['id']}").status_code == 404


def test_owner_deletes_an_empty_knowledge_base(contexts, live_server, committed):
    owner = make_login_user(committed)
    with login(live_server, owner.email) as c:
        ws = c.post("/api/workspaces", json={"name": f"Tidy {uuid.uuid4().hex[:6]}"}).json()
        kb = c.post("/api/knowledge-bases", json={"workspace_id": ws["id"], "title": "Scratch"}).json()
    page = contexts.page()
    sign_in(page, owner.email)
    page.goto(f"/app/kb/{kb['id']}/settings")
    page.once("dialog", lambda d: d.accept("Scratch"))
    page.get_by_role("button", name="Delete knowledge base").click()
    expect(page).to_have_url(f"{live_server}/app/workspaces/{ws['id']}")
    with login(live_server, owner.email) as c:
        assert c.get(f"/api/knowledge-bases/{kb['id']}").status_code == 404
