"""The share panel on a document: permission mode and visibility for its managers, and the people
picker (workspace members by name or email, added with a role, shown with name and email)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from sqlmodel import Session

from openkb.models import User
from tests.api.helpers import make_login_user
from tests.web.test_browser import api, new_page, owner, sign_in  # noqa: F401 - owner is a fixture

pytestmark = pytest.mark.slow


def test_document_goes_custom_and_gets_a_picked_collaborator(contexts, live_server, owner, engine):  # noqa: F811
    colleague = make_login_user(lambda: Session(engine, expire_on_commit=False))
    with Session(engine) as s:
        name = s.get(User, colleague.user_id).display_name
    with api(live_server, owner) as c:
        r = c.post(f"/api/workspaces/{owner['ws']['id']}/members", json={"email": colleague.email, "role": "member"})
        assert r.status_code == 201, r.text
        doc = new_page(c, owner["kb"]["id"], "Picked people", "For a few eyes.\n")

    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    page.get_by_role("button", name="Share", exact=True).click()
    dialog = page.get_by_role("dialog", name="Share and collaborate")
    # inherit mode: no collaborators of its own to pick yet
    expect(dialog.get_by_role("searchbox", name="Add people or groups")).to_have_count(0)
    dialog.get_by_role("combobox", name="Permissions").select_option("custom")
    dialog.get_by_label("Visibility").select_option("private")
    expect(dialog.get_by_label("Visibility")).to_have_value("private")

    dialog.get_by_role("searchbox", name="Add people or groups").fill(colleague.email.split("@")[0])
    dialog.get_by_label("Add as").select_option("editor")
    dialog.get_by_role("button", name=f"Add {name}").click()
    row = dialog.get_by_role("list", name="Collaborators").get_by_role("listitem").filter(has_text=name)
    expect(row).to_contain_text(colleague.email)
    expect(row.get_by_label("Role")).to_have_value("editor")
    expect(dialog.get_by_role("button", name=f"Add {name}")).to_have_count(0)  # already a collaborator

    with api(live_server, owner) as c:
        got = c.get(f"/api/documents/{doc['id']}").json()
        assert (got["permission_mode"], got["visibility"]) == ("custom", "private")
        collab = c.get(f"/api/objects/document/{doc['id']}/collaborators").json()["items"]
        assert {(x["subject_id"], x["role"]) for x in collab} >= {(str(colleague.user_id), "editor")}
    expect(page).to_have_url(re.compile(rf"/docs/{doc['id']}$"))
