"""Groups in the admin console: create, add a member by email, rename, remove the member,
delete; each lands in the database and in the audit log."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect
from sqlmodel import select

from openkb.models import AuditLog, Group
from tests.api.helpers import login, make_login_user
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.slow


def test_admin_manages_a_group_and_its_members(contexts, live_server, committed):
    admin, person = make_login_user(committed, role="tenant_admin"), make_login_user(committed)
    name = f"Editors {uuid.uuid4().hex[:6]}"
    page = contexts.page()
    sign_in(page, admin.email)
    page.goto("/admin/groups")
    create = page.get_by_role("form", name="Create group")
    create.get_by_label("Group name").fill(name)
    create.get_by_role("button", name="Create group").click()
    page.get_by_role("button", name=name, exact=True).click()
    add = page.get_by_role("form", name="Add member")
    add.get_by_label("Email").fill(person.email)
    add.get_by_role("button", name="Add member").click()
    table = page.get_by_role("table", name=f"Members of {name}")
    expect(table.get_by_role("row").filter(has_text=person.email)).to_have_count(1)
    expect(page.get_by_text("1 member")).to_be_visible()

    page.once("dialog", lambda d: d.accept(name + " renamed"))
    page.get_by_role("button", name=f"Rename {name}").click()
    renamed = name + " renamed"
    expect(page.get_by_role("button", name=renamed, exact=True)).to_be_visible()
    with login(live_server, admin.email) as c:
        g = next(x for x in c.get("/api/admin/groups").json()["items"] if x["name"] == renamed)
        assert [m["email"] for m in c.get(f"/api/admin/groups/{g['id']}/members").json()["items"]] == [person.email]

    table.get_by_role("button", name=f"Remove {person.email}").click()
    expect(table.get_by_role("row")).to_have_count(0)
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name=f"Delete {renamed}").click()
    expect(page.get_by_role("button", name=renamed, exact=True)).to_have_count(0)
    with committed() as s:
        assert s.get(Group, uuid.UUID(g["id"])) is None
        actions = {
            a.action
            for a in s.exec(select(AuditLog).where(AuditLog.actor_user_id == admin.user_id)).all()
            if a.action.startswith("group")
        }
    assert actions == {"group.create", "group_member.add", "group.rename", "group_member.remove", "group.delete"}
