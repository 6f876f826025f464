"""Duplicate in the document's More menu and in the tree's item menu: the copy opens, sits right
after the page in the tree and holds the page's body (docs/web.md#the-document-page)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from sqlmodel import Session

from tests.api.helpers import make_login_user
from tests.web.test_browser import api, editor, new_kb, new_page, owner, sign_in  # noqa: F401 - fixture

pytestmark = pytest.mark.slow


def test_duplicate_from_the_more_menu_and_from_the_tree(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Templates")
        first = new_page(c, kb["id"], "Weekly report", "# Week\n\n- Done\n- Next\n")
        new_page(c, kb["id"], "Other", "Other.\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb['id']}/docs/{first['id']}")
    editor(page)
    expect(page.get_by_role("status")).to_have_text("Saved")
    page.get_by_role("button", name="More").click()
    page.get_by_role("menuitem", name="Duplicate").click()
    expect(page.get_by_role("textbox", name="Title")).to_have_value("Weekly report (copy)")
    copy_url = page.url
    assert copy_url != f"/app/kb/{kb['id']}/docs/{first['id']}"
    expect(editor(page)).to_contain_text("Done")
    tree = page.get_by_role("tree")
    expect(tree.get_by_role("link")).to_have_text(["Weekly report", "Weekly report (copy)", "Other"])

    # from the tree: the item's menu
    tree.get_by_role("treeitem", name="Other").hover()
    page.get_by_role("button", name="Actions for Other").click()
    page.get_by_role("menuitem", name="Duplicate").click()
    expect(page.get_by_role("textbox", name="Title")).to_have_value("Other (copy)")
    expect(tree.get_by_role("link")).to_have_text(["Weekly report", "Weekly report (copy)", "Other", "Other (copy)"])
    with api(live_server, owner) as c:
        items = c.get(f"/api/knowledge-bases/{kb['id']}/tree").json()["items"]
        copy = next(i for i in items if i["title"] == "Weekly report (copy)")
        body = c.get(f"/api/documents/{first['id']}").json()["markdown"]
        assert c.get(f"/api/documents/{copy['id']}").json()["markdown"] == body  # as stored, byte for byte
        assert len(c.get(f"/api/documents/{copy['id']}/versions").json()["items"]) == 1  # opening it saved nothing
    assert re.search(rf"/app/kb/{kb['id']}/docs/{copy['id']}$", copy_url)


def test_a_folder_and_a_page_with_sub_pages_are_duplicated_with_what_they_hold(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Projects")
        r = c.post("/api/documents", json={"knowledge_base_id": kb["id"], "type": "folder", "title": "Template"})
        folder = r.json()
        brief = new_page(c, kb["id"], "Brief", "# Brief\n", parent_id=folder["id"])
        new_page(c, kb["id"], "Budget", f"See the [brief](openkb://document/{brief['id']}).\n", parent_id=brief["id"])
        lone = new_page(c, kb["id"], "Notes", "Notes.\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb['id']}/docs/{lone['id']}")
    tree = page.get_by_role("tree")
    # a page with nothing under it offers the plain copy only
    tree.get_by_role("treeitem", name="Notes").hover()
    page.get_by_role("button", name="Actions for Notes").click()
    expect(page.get_by_role("menuitem", name="Duplicate", exact=True)).to_be_visible()
    expect(page.get_by_role("menuitem", name="Duplicate with sub-pages")).to_have_count(0)
    page.get_by_role("button", name="Actions for Notes").click()  # closes it
    # the folder: copied whole, right after it, and the page stays open
    tree.get_by_role("treeitem", name="Template", exact=True).locator(".row").first.hover()  # not its children
    page.get_by_role("button", name="Actions for Template", exact=True).click()
    page.get_by_role("menuitem", name="Duplicate").click()
    copy = tree.get_by_role("treeitem", name="Template (copy)")
    expect(copy).to_be_visible()
    expect(page.get_by_role("textbox", name="Title")).to_have_value("Notes")
    with api(live_server, owner) as c:
        items = c.get(f"/api/knowledge-bases/{kb['id']}/tree").json()["items"]
    top = [i["title"] for i in sorted((i for i in items if i["parent_id"] is None), key=lambda i: i["sort_order"])]
    assert top == ["Template", "Template (copy)", "Notes"]
    folder_copy = next(i for i in items if i["title"] == "Template (copy)")
    brief_copy = next(i for i in items if i["parent_id"] == folder_copy["id"])
    budget_copy = next(i for i in items if i["parent_id"] == brief_copy["id"])
    assert (brief_copy["title"], budget_copy["title"]) == ("Brief", "Budget")
    # a page with sub-pages: both choices; with them, the copy opens with its own sub-page
    tree.get_by_role("treeitem", name="Brief").first.locator(".row").first.hover()
    page.get_by_role("button", name="Actions for Brief").first.click()
    page.get_by_role("menuitem", name="Duplicate with sub-pages").click()
    expect(page.get_by_role("textbox", name="Title")).to_have_value("Brief (copy)")
    with api(live_server, owner) as c:
        items = c.get(f"/api/knowledge-bases/{kb['id']}/tree").json()["items"]
        again = next(i for i in items if i["title"] == "Brief (copy)")
        sub = next(i for i in items if i["parent_id"] == again["id"])
        # the copied sub-page links to its own copied parent, not the original
        assert c.get(f"/api/documents/{sub['id']}").json()["markdown"] == (
            f"See the [brief](openkb://document/{again['id']}).\n"
        )
    assert page.url.endswith(f"/docs/{again['id']}")


def test_copy_to_another_knowledge_base(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        src = new_kb(c, owner, "Drafts")
        dst = new_kb(c, owner, "Handbook for copies")  # a title of its own: the owner is shared by the tests
        r = c.post("/api/documents", json={"knowledge_base_id": dst["id"], "type": "folder", "title": "Archive"})
        archive = r.json()
        new_page(c, dst["id"], "Manual", "The manual.\n")
        page_ = new_page(c, src["id"], "Onboarding", "# Onboarding\n\nWelcome.\n")
        new_page(c, src["id"], "Day one", "First day.\n", parent_id=page_["id"])
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{src['id']}/docs/{page_['id']}")
    tree = page.get_by_role("tree")
    tree.get_by_role("treeitem", name="Onboarding").locator(".row").first.hover()
    page.get_by_role("button", name="Actions for Onboarding").click()
    page.get_by_role("menuitem", name="Copy to…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Copy “Onboarding” to the knowledge base").select_option(label="Handbook for copies")
    inside = dialog.get_by_label("Inside")
    expect(inside.locator("option")).to_have_text(["(top level)", "Archive (folder)", "Manual"])  # pages hold pages too
    inside.select_option(archive["id"])
    dialog.get_by_label("With its sub-pages").check()
    dialog.get_by_role("button", name="Copy", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/app/kb/{dst['id']}/docs/[0-9a-f-]+$"))
    expect(page.get_by_role("textbox", name="Title")).to_have_value("Onboarding")
    expect(editor(page)).to_contain_text("Welcome.")
    with api(live_server, owner) as c:
        items = c.get(f"/api/knowledge-bases/{dst['id']}/tree").json()["items"]
        copy = next(i for i in items if i["title"] == "Onboarding")
        assert copy["parent_id"] == archive["id"]
        assert [i["title"] for i in items if i["parent_id"] == copy["id"]] == ["Day one"]
        assert len(c.get(f"/api/knowledge-bases/{src['id']}/tree").json()["items"]) == 2  # the original stays


def test_a_reader_here_copies_to_where_they_may_write(contexts, live_server, owner, engine):  # noqa: F811
    """Copy to… is offered to a reader of the page since they may create somewhere; the page's own
    knowledge base, where they only read, is not among the places offered."""
    reader = make_login_user(lambda: Session(engine, expire_on_commit=False))
    with api(live_server, owner) as c:
        src = new_kb(c, owner, "Company policies")
        own = new_kb(c, owner, "Reader's team space")
        doc = new_page(c, src["id"], "Travel policy", "Book early.\n")
        r = c.post(f"/api/workspaces/{owner['ws']['id']}/members", json={"email": reader.email, "role": "member"})
        assert r.status_code == 201, r.text
        r = c.post(
            f"/api/objects/knowledge_base/{own['id']}/collaborators",
            json={"subject_type": "user", "subject_id": str(reader.user_id), "role": "editor"},
        )
        assert r.status_code == 201, r.text
    page = contexts.page()
    sign_in(page, reader.email, next_path=f"/app/kb/{src['id']}/docs/{doc['id']}")
    item = page.get_by_role("tree").get_by_role("treeitem", name="Travel policy")
    item.locator(".row").first.hover()
    item.get_by_role("button", name="Actions for Travel policy").click()
    item.get_by_role("menuitem", name="Copy to…").click()
    kb_select = page.get_by_role("dialog").get_by_label("Copy “Travel policy” to the knowledge base")
    expect(kb_select.locator("option", has_text="Reader's team space")).to_have_count(1)
    assert "Company policies" not in kb_select.inner_text()  # where they only read: not offered
    kb_select.select_option(own["id"])
    page.get_by_role("dialog").get_by_role("button", name="Copy", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/app/kb/{own['id']}/docs/[0-9a-f-]+$"))
    expect(page.get_by_role("textbox", name="Title")).to_have_value("Travel policy")


def test_copy_to_from_the_document_more_menu(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        src = new_kb(c, owner, "Scratch")
        dst = new_kb(c, owner, "Published notes")
        doc = new_page(c, src["id"], "Release checklist", "- [ ] tag\n- [ ] announce\n")
        new_page(c, src["id"], "Tagging", "git tag\n", parent_id=doc["id"])
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{src['id']}/docs/{doc['id']}")
    editor(page)
    expect(page.get_by_role("status")).to_have_text("Saved")
    page.get_by_role("button", name="More").click()
    page.get_by_role("menuitem", name="Copy to…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Copy “Release checklist” to the knowledge base").select_option(dst["id"])
    dialog.get_by_label("With its sub-pages").check()  # offered: the page has one
    dialog.get_by_role("button", name="Copy", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/app/kb/{dst['id']}/docs/[0-9a-f-]+$"))
    expect(page.get_by_role("textbox", name="Title")).to_have_value("Release checklist")
    tree = page.get_by_role("tree")
    expect(
        tree.get_by_role("treeitem", name="Release checklist").get_by_role("treeitem", name="Tagging")
    ).to_be_visible()
