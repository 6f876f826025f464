"""Delete to the trash from the tree's item menu and the document's More menu: what is under a
document goes with it, so the question says how many documents (those the caller sees); a
document with nothing under it gets the plain question (docs/web.md#the-document-page)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.web.test_browser import api, new_kb, new_page, owner, sign_in  # noqa: F401 - owner is a fixture

pytestmark = pytest.mark.slow


def test_the_trash_question_counts_what_goes_with_the_document(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Spring cleaning")
        guide = new_page(c, kb["id"], "Guide", "The guide.\n")
        part = c.post(
            "/api/documents",
            json={"knowledge_base_id": kb["id"], "type": "folder", "title": "Part one", "parent_id": guide["id"]},
        ).json()
        new_page(c, kb["id"], "Chapter", "A chapter.\n", parent_id=part["id"])
        leaf = new_page(c, kb["id"], "Leaf", "Alone.\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb['id']}/docs/{leaf['id']}")
    tree = page.get_by_role("tree")

    # the document's own More menu, on a page with nothing under it
    page.get_by_role("button", name="More", exact=True).click()
    page.get_by_role("menuitem", name="Delete").click()
    dialog = page.get_by_role("dialog", name="Delete")
    expect(dialog).to_contain_text("Move “Leaf” to the trash?")
    dialog.get_by_role("button", name="Cancel").click()

    item = tree.get_by_role("treeitem", name="Guide", exact=True)
    item.locator(".row").first.hover()
    item.get_by_role("button", name="Actions for Guide", exact=True).click()
    item.get_by_role("menuitem", name="Delete").click()
    dialog = page.get_by_role("dialog", name="Delete")
    expect(dialog).to_contain_text("Move “Guide” and everything under it (2 documents) to the trash?")
    dialog.get_by_role("button", name="Delete").click()
    expect(dialog).to_have_count(0)
    expect(tree.get_by_role("treeitem", name="Guide", exact=True)).to_have_count(0)
    expect(tree.get_by_role("treeitem", name="Chapter", exact=True)).to_have_count(0)
    with api(live_server, owner) as c:
        titles = [i["title"] for i in c.get(f"/api/knowledge-bases/{kb['id']}/tree").json()["items"]]
        assert titles == ["Leaf"]

    # one document under it: the singular
    with api(live_server, owner) as c:
        new_page(c, kb["id"], "Note", "A note.\n", parent_id=leaf["id"])
    page.reload()
    page.get_by_role("button", name="More", exact=True).click()
    page.get_by_role("menuitem", name="Delete").click()
    expect(page.get_by_role("dialog", name="Delete")).to_contain_text(
        re.compile(r"Move “Leaf” and everything under it \(1 document\) to the trash\?")
    )
