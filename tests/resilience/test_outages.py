"""The API survives a restart of Milvus or the embedder without being restarted itself
(issue 17, docs/operations.md#index-operations): during the outage search answers 503 with
``Retry-After`` and a stable code (Milvus) or degrades honestly (embedder), saves keep working,
and once the part is back search works again and indexing catches up.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter

import httpx
from sqlmodel import Session

from openkb.models import Document


def _search(st, query: str, **kw):
    kb = st.extra.get("kb")  # this module's own knowledge base: other modules' pages stay out
    return st.world.c["owner"].post(
        "/api/search", json={"query": query, **({"knowledge_base_ids": [kb["id"]]} if kb else {}), **kw}
    )


def _page(st, title: str, md: str) -> dict:
    w = st.world
    st.extra.setdefault("kb", w.new_kb())
    doc = w.doc(title, kb=st.extra["kb"])
    r = w.save(doc, md)
    assert r.status_code in (200, 201), r.text
    return doc


def _index_state(st, doc_id: str) -> tuple[str, str | None, str | None]:
    with Session(st.ctx.engine) as s:
        d = s.get(Document, uuid.UUID(doc_id))
        return d.index_status, d.index_failure, d.index_error


def _wait_search(st, query: str, timeout: float = 120.0):
    """Search until it answers 200 (the API is never restarted: its client must come back)."""
    deadline = time.monotonic() + timeout
    while True:
        r = _search(st, query)
        if r.status_code == 200 or time.monotonic() > deadline:
            return r
        time.sleep(0.5)


def test_milvus_restart_503_then_search_comes_back_and_saves_never_stop(stack, caplog):
    st = stack
    st.extra["kb"] = st.world.new_kb()
    word = f"lighthouse{uuid.uuid4().hex[:8]}"
    before = _page(st, "Before", f"# Before\n\n{word} alpha.\n")
    st.run_jobs()
    assert _index_state(st, before["id"])[0] == "indexed"
    r = _search(st, word)
    assert r.status_code == 200 and [x["document_id"] for x in r.json()["results"]] == [before["id"]]
    assert r.json()["degraded"] == []

    st.milvus.kill()
    try:
        r = _search(st, word)
        assert r.status_code == 503, r.text
        assert r.json()["error"] == "INDEX_UNAVAILABLE"
        assert int(r.headers["retry-after"]) >= 1
        caplog.clear()
        caplog.set_level(logging.INFO)
        for _ in range(20):  # an outage under traffic: one line per kind of failure, no tracebacks
            assert _search(st, word).status_code == 503
        assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
        per_logger = Counter(r.name for r in caplog.records if r.levelno >= logging.WARNING)
        assert all(n <= 2 for n in per_logger.values()), per_logger
        # saves keep working: PostgreSQL is the truth, indexing catches up
        during = _page(st, "During", f"# During\n\n{word} beta.\n")
        results = st.run_jobs()
        assert results and all(exc is not None for _, exc in results)
        assert all(getattr(exc, "code", "") == "INDEX_UNAVAILABLE" for _, exc in results), results
        status, kind, error = _index_state(st, during["id"])
        assert (status, kind) == ("pending", "transient"), error  # never `failed` for an outage
        # the page is readable meanwhile
        assert st.world.c["owner"].get(f"/api/documents/{during['id']}").status_code == 200
    finally:
        st.milvus.start()

    r = _wait_search(st, word)  # the collection was released by the restart: reloaded on demand
    assert r.status_code == 200, r.text
    assert before["id"] in [x["document_id"] for x in r.json()["results"]]
    # indexing catches up (here: the reconciler's job, run as the worker would)
    from openkb.db import session_scope
    from openkb.indexing.reconcile import reconcile

    with session_scope(st.ctx.engine) as s:
        out = reconcile(st.ctx, s, deadline_s=0, check_rows=False)
    assert out["documents"] >= 1
    assert all(exc is None for _, exc in st.run_jobs())
    assert _index_state(st, during["id"])[0] == "indexed"
    found = {x["document_id"] for x in _search(st, word).json()["results"]}
    assert {before["id"], during["id"]} <= found


def test_embedder_down_search_degrades_visibly_and_saves_wait(stack):
    st = stack
    st.extra["kb"] = st.world.new_kb()
    word = f"harbour{uuid.uuid4().hex[:8]}"
    doc = _page(st, "Harbour", f"# Harbour\n\n{word} gamma.\n")
    st.run_jobs()
    st.embedder.kill()
    try:
        r = _search(st, word)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["degraded"] == ["dense"]  # keyword-only, and the response says so
        assert [x["document_id"] for x in body["results"]] == [doc["id"]]
        assert all(x["ranking"] == "bm25" for x in body["results"])
        ready = httpx.get(st.base + "/readyz", timeout=30)
        assert ready.json()["degraded"] == ["dense"] and ready.json()["checks"]["dense"]["ok"] is False
        assert ready.status_code == 200  # keyword search still serves: reported, not taken out of rotation
        later = _page(st, "Later", f"# Later\n\n{word} delta.\n")  # 201 while the embedder is down
        results = st.run_jobs()
        assert results and all(exc is not None for _, exc in results)
        status, kind, _ = _index_state(st, later["id"])
        assert (status, kind) == ("pending", "transient")
    finally:
        st.embedder.start()
    r = _search(st, word)
    assert r.status_code == 200 and r.json()["degraded"] == []
    ready = httpx.get(st.base + "/readyz", timeout=30).json()
    assert ready["degraded"] == [] and ready["checks"]["dense"]["ok"] is True
    from openkb.db import session_scope
    from openkb.indexing.reconcile import reconcile

    with session_scope(st.ctx.engine) as s:
        reconcile(st.ctx, s, deadline_s=0, check_rows=False)
    assert all(exc is None for _, exc in st.run_jobs())
    assert _index_state(st, later["id"])[0] == "indexed"


def test_a_hung_embedder_costs_one_bounded_wait_then_keyword_results(stack, monkeypatch):
    """A stopped (not dead) embedding service: the dense route runs out of its deadline and the
    search is answered BM25-only, instead of hanging or failing with 503."""
    import os
    import signal

    import openkb.retrieval.service as retrieval

    st = stack
    st.extra["kb"] = st.world.new_kb()
    word = f"quay{uuid.uuid4().hex[:8]}"
    doc = _page(st, "Quay", f"# Quay\n\n{word} epsilon.\n")
    st.run_jobs()
    monkeypatch.setattr(retrieval, "SEARCH_TIMEOUT_S", 3.0)
    os.kill(st.embedder.proc.pid, signal.SIGSTOP)  # our own embedder
    try:
        r = _search(st, word)
    finally:
        os.kill(st.embedder.proc.pid, signal.SIGCONT)
    assert r.status_code == 200, r.text
    assert r.json()["degraded"] == ["dense"]
    assert [x["document_id"] for x in r.json()["results"]] == [doc["id"]]
    assert _search(st, word).json()["degraded"] == []
