"""The browser's Back button asks before leaving unsaved work, as a link does
(docs/web.md#the-document-page): declining stays on the page with the text, which then saves;
with nothing unsaved Back just goes back."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.web.test_browser import (  # noqa: F401 - owner is a fixture
    api,
    autosaved,
    editor,
    new_kb,
    new_page,
    owner,
    sign_in,
    type_at_end,
)

pytestmark = pytest.mark.slow


def test_back_with_unsaved_text_asks_first(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Going back")
        first = new_page(c, kb["id"], "Where I was", "Before.\n")
        doc = new_page(c, kb["id"], "Being written", "Start.\n")
    page = contexts.page()
    asked: list[str] = []
    page.on("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb['id']}/docs/{first['id']}")
    editor(page)
    page.get_by_role("tree").get_by_role("link", name="Being written", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/docs/{doc['id']}$"))
    before = type_at_end(page, " More words")
    page.go_back()
    for _ in range(50):  # the question comes from the page's popstate handler, after go_back returns
        if asked:
            break
        page.wait_for_timeout(100)
    assert asked == ["You have unsaved changes. Leave anyway?"]
    expect(page).to_have_url(re.compile(rf"/docs/{doc['id']}$"))
    expect(editor(page)).to_contain_text("Start. More words")
    autosaved(page, before)
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{doc['id']}").json()["markdown"] == "Start. More words\n"
    # saved: Back goes back, with no question
    page.go_back()
    expect(page).to_have_url(re.compile(rf"/docs/{first['id']}$"))
    expect(editor(page)).to_contain_text("Before.")
    assert len(asked) == 1
