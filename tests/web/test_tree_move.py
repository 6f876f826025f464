"""Move in the tree's item menu: the dialog lists the knowledge base's folders (not the item's
own subtree) and the top level; the item moves there (docs/web.md#the-document-page)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.web.test_browser import api, new_kb, new_page, owner, sign_in  # noqa: F401 - owner is a fixture

pytestmark = pytest.mark.slow


def test_move_a_page_into_a_folder_and_back_to_the_top(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Moving house")
        folder = c.post(
            "/api/documents", json={"knowledge_base_id": kb["id"], "type": "folder", "title": "Boxes"}
        ).json()
        inner = c.post(
            "/api/documents",
            json={"knowledge_base_id": kb["id"], "type": "folder", "title": "Inner box", "parent_id": folder["id"]},
        ).json()
        doc = new_page(c, kb["id"], "Lamp", "A lamp.\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb['id']}/docs/{doc['id']}")
    tree = page.get_by_role("tree")

    def move(title: str, to: str) -> None:
        item = tree.get_by_role("treeitem", name=title, exact=True)
        item.locator(".row").first.hover()
        item.get_by_role("button", name=f"Actions for {title}", exact=True).click()
        item.get_by_role("menuitem", name="Move").click()
        dialog = page.get_by_role("dialog")
        dialog.get_by_label(f"Move “{title}” to").select_option(label=to)
        dialog.get_by_role("button", name="Move").click()
        expect(dialog).to_have_count(0)

    # a folder cannot go into itself or below: its own subtree is not offered
    item = tree.get_by_role("treeitem", name="Boxes", exact=True)
    item.locator(".row").first.hover()
    item.get_by_role("button", name="Actions for Boxes", exact=True).click()
    item.get_by_role("menuitem", name="Move").click()
    options = page.get_by_role("dialog").get_by_label("Move “Boxes” to").locator("option")
    expect(options).to_have_text(["(top level)"])
    page.get_by_role("dialog").get_by_role("button", name="Cancel").click()

    move("Lamp", "Inner box")
    expect(tree.get_by_role("treeitem", name="Inner box").get_by_role("treeitem", name="Lamp")).to_be_visible()
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{doc['id']}").json()["parent_id"] == inner["id"]
    move("Lamp", "(top level)")
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{doc['id']}").json()["parent_id"] is None
