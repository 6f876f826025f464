"""Move in the tree's item menu: the dialog lists the knowledge base's top level and its folders
and pages in tree order, indented by depth, folders marked (never the item's own subtree); the
item moves there, under a page too (docs/web.md#the-document-page)."""

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
        item.get_by_role("menuitem", name="Move", exact=True).click()
        dialog = page.get_by_role("dialog")
        dialog.get_by_label(f"Move “{title}” to").select_option(to)
        dialog.get_by_role("button", name="Move").click()
        expect(dialog).to_have_count(0)

    # a folder cannot go into itself or below: its own subtree is not offered; pages are
    item = tree.get_by_role("treeitem", name="Boxes", exact=True)
    item.locator(".row").first.hover()
    item.get_by_role("button", name="Actions for Boxes", exact=True).click()
    item.get_by_role("menuitem", name="Move", exact=True).click()
    options = page.get_by_role("dialog").get_by_label("Move “Boxes” to").locator("option")
    expect(options).to_have_text(["(top level)", "Lamp"])
    page.get_by_role("dialog").get_by_role("button", name="Cancel").click()

    move("Lamp", inner["id"])
    expect(tree.get_by_role("treeitem", name="Inner box").get_by_role("treeitem", name="Lamp")).to_be_visible()
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{doc['id']}").json()["parent_id"] == inner["id"]
    move("Lamp", "")
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{doc['id']}").json()["parent_id"] is None


def test_move_a_page_under_a_page_from_a_list_shown_as_the_tree(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Nested pages")
        guide = new_page(c, kb["id"], "Guide", "The guide.\n")
        folder = c.post("/api/documents", json={"knowledge_base_id": kb["id"], "type": "folder", "title": "Guide"}).json()
        intro = new_page(c, kb["id"], "Intro", "Hello.\n", parent_id=guide["id"])
        chapter = new_page(c, kb["id"], "Chapter", "A chapter.\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb['id']}/docs/{chapter['id']}")
    tree = page.get_by_role("tree")
    item = tree.get_by_role("treeitem", name="Chapter", exact=True)
    item.locator(".row").first.hover()
    item.get_by_role("button", name="Actions for Chapter", exact=True).click()
    item.get_by_role("menuitem", name="Move", exact=True).click()
    select = page.get_by_role("dialog").get_by_label("Move “Chapter” to")
    # tree order, one indent per level, a folder told from a page of the same title; not itself
    shown = select.locator("option").evaluate_all("os => os.map(o => [o.value, o.textContent])")
    pad = "\u00a0" * 3
    assert shown == [
        ["", "(top level)"],
        [guide["id"], pad + "Guide"],
        [intro["id"], pad * 2 + "Intro"],
        [folder["id"], pad + "Guide (folder)"],
    ]
    select.select_option(intro["id"])
    page.get_by_role("dialog").get_by_role("button", name="Move").click()
    expect(page.get_by_role("dialog")).to_have_count(0)
    expect(tree.get_by_role("treeitem", name="Intro").get_by_role("treeitem", name="Chapter")).to_be_visible()
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{chapter['id']}").json()["parent_id"] == intro["id"]
