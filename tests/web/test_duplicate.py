"""Duplicate in the document's More menu and in the tree's item menu: the copy opens, sits right
after the page in the tree and holds the page's body (docs/web.md#the-document-page)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

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
