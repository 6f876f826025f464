"""The browser tab names the page (docs/web.md): a document's title (kept up to date while it is
renamed), a knowledge base's, the search's query, the account and sign-in pages, a share link's
document; then the product's name. Tabs, history entries and bookmarks read apart. The
breadcrumb's separators are drawn, not read."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from tests.web.test_browser import api, editor, new_kb, new_page, owner, sign_in  # noqa: F401 - owner is a fixture

pytestmark = pytest.mark.slow


def test_each_page_names_itself_in_the_tab(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Field guide")
        doc = new_page(c, kb["id"], "Birds of the coast", "Gulls.\n")
        link = c.post(f"/api/objects/document/{doc['id']}/share-links", json={}).json()
    page = contexts.page()
    page.goto("/login")
    expect(page).to_have_title("Sign in · OpenKB")
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb['id']}/docs/{doc['id']}")
    editor(page)
    expect(page).to_have_title("Birds of the coast · OpenKB")
    title = page.get_by_role("textbox", name="Title")
    title.fill("Birds of the shore")
    expect(page).to_have_title("Birds of the shore · OpenKB")
    expect(page.get_by_role("status")).to_have_text("Saved")
    # the breadcrumb's links are named by their titles alone (its "/" separators are not read)
    page.get_by_role("navigation", name="Breadcrumb").get_by_role("link", name="Field guide", exact=True).click()
    expect(page).to_have_title("Field guide · OpenKB")
    page.goto("/app/search?q=gulls")
    expect(page).to_have_title("gulls · Search · OpenKB")
    page.goto("/app")
    expect(page).to_have_title("Home · OpenKB")

    visitor = contexts.page()
    visitor.goto(urlsplit(link["url"]).path)
    expect(visitor).to_have_title("Birds of the shore · OpenKB")
