"""Source mode keeps its text until *Save source* (docs/web.md#the-document-page): switching to
Edit or Read with unsaved source text, or following a link, asks first; declining keeps the
text, accepting drops it and shows what is saved. Nothing is saved on the way."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.web.test_browser import api, editor, new_kb, new_page, owner, sign_in  # noqa: F401 - owner is a fixture

pytestmark = pytest.mark.slow


def test_unsaved_source_text_is_not_dropped_without_asking(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Source drafts")
        doc = new_page(c, kb["id"], "Draft in source", "Saved text.\n")
        other = new_page(c, kb["id"], "Another page", "Elsewhere.\n")
    page = contexts.page()
    asked: list[str] = []
    answer = {"accept": False}

    def on_dialog(d):
        asked.append(d.message)
        d.accept() if answer["accept"] else d.dismiss()

    page.on("dialog", on_dialog)
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb['id']}/docs/{doc['id']}")
    editor(page)
    page.get_by_role("button", name="Source", exact=True).click()
    source = page.get_by_label("Markdown source")
    expect(source).to_have_value("Saved text.\n")

    # nothing typed yet: Edit switches without a question
    page.get_by_role("button", name="Edit", exact=True).click()
    expect(editor(page)).to_contain_text("Saved text.")
    assert asked == []

    page.get_by_role("button", name="Source", exact=True).click()
    source.fill("Saved text.\n\nTyped in source.\n")
    for leave in ("Edit", "Read"):
        page.get_by_role("button", name=leave, exact=True).click()
        assert asked[-1] == "Leave the source without saving it? Your changes to it will be lost."
        expect(source).to_have_value("Saved text.\n\nTyped in source.\n")  # declined: still there
    page.get_by_role("tree").get_by_role("link", name="Another page", exact=True).click()
    assert asked[-1] == "You have unsaved changes. Leave anyway?"
    expect(page).to_have_url(re.compile(rf"/docs/{doc['id']}$"))
    expect(source).to_have_value("Saved text.\n\nTyped in source.\n")

    # a text the server refuses stays unsaved: leaving source mode still asks about it
    source.fill("Saved text.\n\nbad<br>line\n")
    page.get_by_role("button", name="Save source").click()
    expect(page.get_by_role("alert")).to_contain_text("Line 3, column 4")
    page.get_by_role("button", name="Edit", exact=True).click()
    assert len(asked) == 4 and asked[-1].startswith("Leave the source without saving it?")
    expect(source).to_have_value("Saved text.\n\nbad<br>line\n")

    answer["accept"] = True
    page.get_by_role("button", name="Edit", exact=True).click()
    expect(editor(page)).to_contain_text("Saved text.")
    expect(editor(page)).not_to_contain_text("Typed in source.")
    expect(editor(page)).not_to_contain_text("bad")
    page.get_by_role("tree").get_by_role("link", name="Another page", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/docs/{other['id']}$"))
    assert len(asked) == 5  # the last link was followed without a question: nothing was unsaved
    with api(live_server, owner) as c:
        got = c.get(f"/api/documents/{doc['id']}").json()
        assert got["markdown"] == "Saved text.\n" and got["version_no"] == 1
