"""How the document page loads (docs/web.md#the-document-page): its first API reads leave with the
page itself, not after the app has started.

The server names the document, its knowledge base and the session in ``<link rel="preload"
as="fetch">`` hints on ``/app/kb/<kb>/docs/<doc>``; the app's own requests for the same URLs must
take those answers (one request each, started by the hint), or every load pays twice. The tree
and the outline render once the editor is up (bench/web.py measures the time to it).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from sqlalchemy import text as sa_text

from tests.web.test_browser import api, new_page, owner, sign_in  # noqa: F401 - owner is a fixture

pytestmark = pytest.mark.slow

# every resource entry for the page's first reads: [url, initiatorType] in the order they started
ENTRIES = """(urls) => performance.getEntriesByType('resource')
  .filter(e => urls.some(u => e.name.endsWith(u)))
  .map(e => [new URL(e.name).pathname, e.initiatorType])"""


def test_the_first_reads_start_with_the_page_and_are_not_sent_twice(contexts, live_server, owner, engine):  # noqa: F811
    kb_id = owner["kb"]["id"]
    with api(live_server, owner) as c:
        doc = new_page(c, kb_id, "Loads once", "# Loads once\n\nbody text\n")
    with engine.begin() as conn:  # no index-status look-ups during the load
        conn.execute(sa_text("UPDATE documents SET index_status = 'indexed' WHERE id = :id"), {"id": doc["id"]})
    page = contexts.page()
    doc_path = f"/app/kb/{kb_id}/docs/{doc['id']}"
    sign_in(page, owner["email"])
    page.goto(doc_path)  # a full load, as from a link in a mail or a Dify citation
    expect(page.locator(".editor[data-ready='true'] .ProseMirror")).to_contain_text("body text")
    urls = [f"/api/documents/{doc['id']}", f"/api/knowledge-bases/{kb_id}", "/api/auth/me"]
    seen = page.evaluate(ENTRIES, urls)
    assert sorted(seen) == sorted([u, "link"] for u in urls), seen
    # the tree follows the editor
    expect(page.get_by_role("navigation", name="Contents").get_by_role("treeitem", name="Loads once")).to_be_visible()
