"""Ctrl+S on the document page saves now (docs/web.md#the-document-page), in the editor without
waiting for the autosave's pause and in source mode as *Save source*, and the browser's own
"Save page as" is not started; with nothing unsaved it sends nothing."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.web.test_browser import api, autosaved, editor, new_kb, new_page, owner, sign_in, type_at_end  # noqa: F401 - owner is a fixture

pytestmark = pytest.mark.slow

# a window listener added after the page's own: it sees whether the page kept the key for itself
WATCH = "window.addEventListener('keydown', (e) => { if (e.key === 's') window.__saveKeyKept = e.defaultPrevented })"


def test_ctrl_s_saves_now_in_the_editor_and_in_source_mode(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Saving by key")
        doc = new_page(c, kb["id"], "Keyed", "First.\n")
    page = contexts.page()
    saves: list[str] = []
    page.on("request", lambda r: saves.append(r.url) if r.method == "POST" and r.url.endswith("/versions") else None)
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb['id']}/docs/{doc['id']}")
    editor(page)
    page.evaluate(WATCH)

    page.keyboard.press("Control+s")  # nothing unsaved: nothing sent
    assert page.evaluate("window.__saveKeyKept") is True
    before = type_at_end(page, " Second.")
    page.keyboard.press("Control+s")
    autosaved(page, before)
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{doc['id']}").json()["markdown"] == "First. Second.\n"
    assert len(saves) == 1

    page.get_by_role("button", name="Source", exact=True).click()
    page.get_by_label("Markdown source").fill("First. Second.\n\nThird, in source.\n")
    page.get_by_label("Markdown source").press("Control+s")
    expect(editor(page)).to_contain_text("Third, in source.")  # saved: back in the editor
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{doc['id']}").json()["markdown"] == "First. Second.\n\nThird, in source.\n"
    assert len(saves) == 2
