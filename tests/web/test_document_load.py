"""How the document page loads (docs/web.md#build-and-serving): its document read leaves with the
page itself, not after the app has started, and the page's other reads wait for it.

The server names the document in a ``<link rel="preload" as="fetch">`` hint on
``/app/kb/<kb>/docs/<doc>``; the app's own request for the same URL must take that answer (one
request, started by the hint), or every load pays twice. The knowledge base and the session are
read once the document has answered: started together, the three answered about together, as
late as all three. The tree and the outline render once the editor is up (bench/web.py measures
the time to it).
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect
from sqlalchemy import text as sa_text

from tests.web.test_browser import api, new_page, owner, sign_in  # noqa: F401 - owner is a fixture

pytestmark = pytest.mark.slow

# every resource entry for the page's first reads: [url, initiatorType, startTime, responseEnd]
ENTRIES = """(urls) => performance.getEntriesByType('resource')
  .filter(e => urls.some(u => e.name.endsWith(u)))
  .map(e => [new URL(e.name).pathname, e.initiatorType, e.startTime, e.responseEnd])"""


def test_the_document_read_starts_with_the_page_and_the_others_follow_it(contexts, live_server, owner, engine):  # noqa: F811
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
    # the reads that follow the page may still be on their way (a resource entry exists once its
    # answer is in): wait for them rather than for a moment that a loaded machine can miss
    page.wait_for_load_state("networkidle")
    doc_url, kb_url = f"/api/documents/{doc['id']}", f"/api/knowledge-bases/{kb_id}"
    seen = page.evaluate(ENTRIES, [doc_url, kb_url, "/api/auth/me"])
    assert sorted((u, kind) for u, kind, _, _ in seen) == [
        ("/api/auth/me", "fetch"),
        (doc_url, "link"),
        (kb_url, "fetch"),
    ], seen
    answered = next(end for u, _, _, end in seen if u == doc_url)
    assert all(start >= answered for u, _, start, _ in seen if u != doc_url), seen
    # the tree follows the editor
    expect(page.get_by_role("navigation", name="Contents").get_by_role("treeitem", name="Loads once")).to_be_visible()


def test_an_answer_that_lands_before_the_page_subscribes_is_shown(contexts, live_server, owner):  # noqa: F811
    """The preloaded reads can answer between the page's first render and the moment its hooks
    subscribe (Preact runs them after paint: on the next frame, at most 100 ms later). That answer
    notified no one and the page stayed on "Loading…" for good. Here frames never come, so the
    hooks always subscribe late, after the answers."""
    kb_id = owner["kb"]["id"]
    with api(live_server, owner) as c:
        doc = new_page(c, kb_id, "Answers early", "# Answers early\n\nearly body\n")
    page = contexts.page()
    sign_in(page, owner["email"])
    page.add_init_script("window.requestAnimationFrame = () => 0")

    def late(route) -> None:  # the entry script arrives after the preloaded answers
        time.sleep(0.5)
        route.continue_()

    page.route("**/assets/index-*.js", late)
    page.goto(f"/app/kb/{kb_id}/docs/{doc['id']}")
    expect(page.locator(".editor[data-ready='true'] .ProseMirror")).to_contain_text("early body")
