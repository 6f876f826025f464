"""The document page shows its own index status and follows it (docs/web.md#the-document-page).

After a save the page reads *Indexing…* until the worker made the save searchable; while it is
pending the page looks again with a growing delay, never while the tab is hidden. The page's
clock is Playwright's (``page.clock``), so "no look while hidden" is checked by running the
timers forward, without waiting.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect
from sqlalchemy import text as sa_text

from tests.web.test_browser import (  # noqa: F401 - owner is a fixture
    _wait_indexed,
    api,
    autosaved,
    new_page,
    owner,
    sign_in,
    type_at_end,
)

pytestmark = pytest.mark.slow


def _set_index(engine, doc_id: str, status: str, error: str | None = None) -> None:
    with engine.begin() as conn:
        conn.execute(
            sa_text("UPDATE documents SET index_status = :s, index_error = :e WHERE id = :id"),
            {"s": status, "e": error, "id": doc_id},
        )


@pytest.mark.usefixtures("worker")
def test_a_save_reads_indexing_until_the_worker_made_it_searchable(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Index status", "# Start\n\nfirst words\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    badge = page.locator("[data-index-status]")
    expect(badge).to_be_visible()
    # every value the badge shows from now on, in order
    page.evaluate(
        """() => {
            const el = document.querySelector('[data-index-status]')
            window.__seen = [el.dataset.indexStatus]
            new MutationObserver(() => window.__seen.push(el.dataset.indexStatus))
                .observe(el, { attributes: true, attributeFilter: ['data-index-status'] })
        }"""
    )
    before = type_at_end(page, " and more words")
    autosaved(page, before)
    expect(badge).to_have_attribute("data-index-status", "indexed", timeout=120_000)
    expect(badge).to_have_text("Searchable")
    seen = page.evaluate("window.__seen")
    assert "pending" in seen and seen[-1] == "indexed", seen
    assert seen.index("pending") < len(seen) - 1


def _run_until(page, looks: list[str], count: int, step_ms: int = 250, real_s: float = 30.0) -> None:
    """Run the page's clock forward in small steps until ``count`` looks were made (each step
    is a round trip, which lets a look's answer arrive and schedule the next look). Bounded in
    real time, not in steps: on a loaded machine a look's answer can take longer than a fixed
    number of quick steps (the page's clock is fake, the server's round trip is not)."""
    deadline = time.monotonic() + real_s
    while len(looks) < count and time.monotonic() < deadline:
        page.clock.run_for(step_ms)
        if len(looks) < count:
            time.sleep(0.02)
    assert len(looks) >= count, looks


def _visibility(page, state: str) -> None:
    page.evaluate(
        """(state) => {
            Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => state })
            document.dispatchEvent(new Event('visibilitychange'))
        }""",
        state,
    )


@pytest.mark.usefixtures("worker")
def test_pending_is_watched_only_while_the_tab_is_visible_then_failed_shows_why(contexts, live_server, owner, engine):  # noqa: F811
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Watched page", "watched\n")
        _wait_indexed(c, doc["id"])  # the creation's job is done
    _set_index(engine, doc["id"], "pending")  # no job is queued: only this test moves it
    page = contexts.page()
    sign_in(page, owner["email"])
    page.clock.install()
    looks: list[str] = []
    doc_url = re.compile(rf"/api/documents/{doc['id']}$")
    page.on("request", lambda r: looks.append(r.url) if r.method == "GET" and doc_url.search(r.url) else None)
    answered: list[str] = []
    page.on(
        "requestfinished", lambda r: answered.append(r.url) if r.method == "GET" and doc_url.search(r.url) else None
    )
    page.goto(f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    badge = page.locator("[data-index-status]")
    expect(badge).to_have_text("Indexing…")
    expect(badge).to_have_attribute("title", "The latest save is not searchable yet")
    loaded = len(looks)  # the page's own load
    _run_until(page, looks, loaded + 2)  # still pending: it keeps looking

    # hidden: no look however long it stays hidden
    _visibility(page, "hidden")
    page.clock.run_for(100)
    hidden = len(looks)
    for _ in range(5):
        page.clock.run_for(60_000)
    assert len(looks) == hidden
    # the look made just before hiding may still be on its way: its answer must not read the
    # status set below (it would show "failed" without the look this test waits for)
    deadline = time.monotonic() + 30
    while len(answered) < len(looks) and time.monotonic() < deadline:
        time.sleep(0.05)
    page.clock.run_for(100)
    assert len(looks) == hidden

    # shown again: it looks at once and follows the status to failed, with the reason
    _set_index(engine, doc["id"], "failed", "embedder refused the chunk")
    _visibility(page, "visible")
    _run_until(page, looks, hidden + 1)
    expect(badge).to_have_text("Not searchable: indexing failed")
    expect(badge).to_have_attribute("data-index-status", "failed")
    expect(badge).to_have_attribute("title", "embedder refused the chunk")
    final = len(looks)
    for _ in range(3):
        page.clock.run_for(60_000)
    assert len(looks) == final  # failed is final: no more looks
