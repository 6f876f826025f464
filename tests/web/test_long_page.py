"""A long page in the editor: paragraphs and headings away from the viewport are not laid out
(content-visibility, web/src/styles.css), the blocks around the selection always are (the
`pm-near` decoration, web/src/editor/plugins.ts), and the page still edits, finds and saves as
a whole (docs/web.md#long-pages)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.web.test_browser import api, autosaved, editor, new_page, owner, sign_in  # noqa: F401 - fixture

pytestmark = pytest.mark.slow

SKIPPED = "e => !e.checkVisibility({contentVisibilityAuto: true})"  # inside a block the browser skips


def test_far_blocks_are_skipped_and_the_edited_ones_are_not(contexts, live_server, owner):  # noqa: F811
    md = "".join(f"Paragraph {i} with **bold {i}** words.\n\n" for i in range(400))
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Long page", md)
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    surface = editor(page)
    page.wait_for_load_state("networkidle")
    paragraphs = surface.locator(":scope > p")
    expect(paragraphs).to_have_count(400)
    assert paragraphs.nth(399).locator("strong").evaluate(SKIPPED)  # far below the viewport
    assert not paragraphs.nth(0).locator("strong").evaluate(SKIPPED)

    before = int(page.get_by_role("status").get_attribute("data-saves"))
    paragraphs.nth(5).click()
    page.keyboard.press("End")
    expect(paragraphs.nth(5)).to_have_class("pm-near")
    for i in (3, 4, 6, 7):  # two blocks either side
        expect(paragraphs.nth(i)).to_have_class("pm-near")
    for i in (2, 8, 399):
        expect(paragraphs.nth(i)).not_to_have_class("pm-near")
    page.keyboard.press("Enter")
    page.keyboard.type("/")
    expect(page.locator(".milkdown-slash-menu").get_by_text("Math", exact=True)).to_be_visible()
    page.keyboard.press("Escape")
    page.keyboard.press("Backspace")
    page.keyboard.type("A new line.")

    # Ctrl+End: the caret at the very end (the browser put it at the start of the skipped last
    # block), the block in view and laid out; Ctrl+Home back to the start
    page.keyboard.press("Control+End")
    expect(paragraphs.nth(399)).to_have_class("pm-near")
    assert not paragraphs.nth(399).locator("strong").evaluate(SKIPPED)
    page.keyboard.type(" The end.")
    page.keyboard.press("Control+Home")
    page.keyboard.type("Start: ")
    autosaved(page, before)
    with api(live_server, owner) as c:
        stored = c.get(f"/api/documents/{doc['id']}").json()["markdown"]
    assert "Paragraph 5 with **bold 5** words.\n\nA new line.\n\nParagraph 6" in stored
    assert stored.startswith("Start: Paragraph 0 with")
    assert stored.endswith("Paragraph 399 with **bold 399** words. The end.\n")
    assert "pm-near" not in stored
