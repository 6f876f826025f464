"""Index jobs share their collection's flushes (``service.request_flush``, docs/retrieval.md#flushes).
Real PostgreSQL + Milvus Lite.

On Lite every flush after a job that deleted rows left a delta file its manifest lists for good,
and the manifest is rewritten on each flush: one flush per save made each flush cost more than
the one before (the soak slowed by a fifth in ten minutes). Jobs of one process now flush a
collection at once only when it was not flushed within the interval; the jobs in between get one
trailing flush. The flushes are counted on the real client (its own ``flush``, called through).
"""

from __future__ import annotations

import time
import uuid

import pytest

from openkb.indexing import milvus as mv
from openkb.indexing import service
from openkb.indexing.profiles_spec import make_profile


@pytest.fixture()
def target(app_ctx):
    spec = make_profile(model_name=None, dim=0, version=800 + uuid.uuid4().int % 90)  # BM25-only: no embedder
    mv.ensure_collection(app_ctx.milvus, spec)
    yield service.Target(collection=spec.collection_name, spec=spec)
    service.flush_pending(app_ctx)
    service.drop_collection(app_ctx, spec.collection_name)  # after a timer's flush still running


@pytest.fixture()
def flushes(app_ctx, monkeypatch):
    """Collections the real client flushed, in order (each once its flush returned). A trailing
    flush an earlier test left waiting (another collection of the shared context) runs first,
    uncounted: it would otherwise show up in this test's count."""
    service.flush_pending(app_ctx)
    seen: list[str] = []
    real = app_ctx.milvus.flush

    def counting(collection_name, *args, **kwargs):
        out = real(collection_name, *args, **kwargs)
        seen.append(collection_name)
        return out

    monkeypatch.setattr(app_ctx.milvus, "flush", counting)
    return seen


def _rows(document_id: str, n: int, word: str) -> dict[str, dict]:
    out = {}
    for i in range(n):
        cid = str(uuid.uuid4())
        out[cid] = mv.chunk_row(
            chunk_id=cid,
            tenant_id=document_id,
            workspace_id=document_id,
            knowledge_base_id=document_id,
            document_id=document_id,
            version_id=str(uuid.uuid4()),
            doc_status="published",
            visibility_eff="workspace",
            content_text=f"{word} chunk {i}",
        )
    return out


def _saves(app_ctx, target, doc: str, count: int) -> dict[str, dict]:
    """``count`` saves of one page as its index jobs write them: each replaces the page's rows."""
    rows: dict[str, dict] = {}
    for n in range(count):
        rows = _rows(doc, 2, f"coalesce{n}")
        rep = service.apply_rows(app_ctx, target, [doc], rows)
        assert rep.inserted == 2 and rep.deleted == (2 if n else 0)
    return rows


def test_index_jobs_within_the_interval_share_one_flush(app_ctx, target, flushes, monkeypatch):
    monkeypatch.setattr(service, "FLUSH_INTERVAL_S", 3600.0)  # the trailing flush waits for flush_pending
    doc = str(uuid.uuid4())
    last = _saves(app_ctx, target, doc, 5)
    # the first job flushed at once; the other four only asked for the trailing flush
    assert flushes == [target.collection]
    # nothing waits to be seen: the rows written since are searched and queried already
    have = mv.query_rows(app_ctx.milvus, target.collection, f'document_id == "{doc}"', output_fields=["id"])
    assert {r["id"] for r in have} == set(last)
    assert service.flush_pending(app_ctx) == [target.collection]
    assert flushes == [target.collection] * 2
    assert service.flush_pending(app_ctx) == []  # one trailing flush, not one per job


def test_the_trailing_flush_runs_at_the_end_of_the_interval(app_ctx, target, flushes, monkeypatch):
    """The first job flushes at once; the others' flush runs when its timer ends, with nobody
    asking again. On a loaded machine the third job can come after that trailing flush and get
    one of its own (three flushes instead of two): what is checked is that none is left waiting."""
    monkeypatch.setattr(service, "FLUSH_INTERVAL_S", 0.2)
    _saves(app_ctx, target, str(uuid.uuid4()), 3)
    assert flushes[:1] == [target.collection]
    gate = service._gate(app_ctx, target.collection)
    deadline = time.monotonic() + 60
    while len(flushes) < 2 or gate.timer is not None:  # the timers' flushes, without anyone asking
        assert time.monotonic() < deadline, flushes
        time.sleep(0.05)
    assert set(flushes) == {target.collection} and len(flushes) in (2, 3), flushes
    assert service.flush_pending(app_ctx) == []


def test_an_interval_of_zero_flushes_after_every_job(app_ctx, target, flushes, monkeypatch):
    monkeypatch.setattr(service, "FLUSH_INTERVAL_S", 0.0)
    _saves(app_ctx, target, str(uuid.uuid4()), 3)
    assert flushes == [target.collection] * 3


def test_rows_waiting_for_their_flush_are_searched_and_replaced_ones_are_not(app_ctx, target, monkeypatch):
    """Why a longer interval hides nothing: a search (not only a query) finds the rows of the
    jobs that left their flush for later, and no longer finds the rows those jobs replaced."""
    monkeypatch.setattr(service, "FLUSH_INTERVAL_S", 3600.0)
    doc = str(uuid.uuid4())
    _saves(app_ctx, target, doc, 3)  # the first save flushed; the next two wait
    where = f'document_id == "{doc}"'
    latest = mv.hybrid_search(app_ctx.milvus, target.collection, "coalesce2", where, 10, target.spec)
    assert len(latest) == 2 and all("coalesce2" in h.fields["content_text"] for h in latest)
    for replaced in ("coalesce0", "coalesce1"):
        assert mv.hybrid_search(app_ctx.milvus, target.collection, replaced, where, 10, target.spec) == []


def test_a_drop_cancels_the_waiting_flush_and_waits_for_a_running_one(app_ctx, monkeypatch):
    """Dropping a collection (``index drop``, a fresh rebuild) on Lite while one of its flushes
    runs broke the drop half-way ("manifest.json.tmp" missing); the drop now cancels the flush
    still waiting and takes the lock a running flush holds."""
    import threading

    monkeypatch.setattr(service, "FLUSH_INTERVAL_S", 3600.0)
    spec = make_profile(model_name=None, dim=0, version=800 + uuid.uuid4().int % 90)
    mv.ensure_collection(app_ctx.milvus, spec)
    target = service.Target(collection=spec.collection_name, spec=spec)
    _saves(app_ctx, target, str(uuid.uuid4()), 2)  # the second save's flush waits

    dropped = threading.Event()
    with service._lite_collection_lock(app_ctx, target.collection):  # as a flush running elsewhere
        worker = threading.Thread(target=lambda: (service.drop_collection(app_ctx, target.collection), dropped.set()))
        worker.start()
        assert not dropped.wait(0.5)  # the drop waits for the flush
        assert app_ctx.milvus.has_collection(target.collection)
    worker.join(60)
    assert dropped.is_set() and not app_ctx.milvus.has_collection(target.collection)
    assert service.flush_pending(app_ctx) == []  # the waiting flush was cancelled, not run on nothing
