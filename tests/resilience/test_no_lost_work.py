"""No lost index work (issue 17, docs/operations.md#index-operations): values the index cannot
store are refused when written; a document Milvus refuses anyway fails alone and never stops a
repair; duplicate jobs are harmless; the reconciler finds work a killed worker lost.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid

from sqlalchemy import text
from sqlmodel import Session

from openkb.db import session_scope
from openkb.indexing import milvus as mv
from openkb.indexing.profiles import current_target
from openkb.indexing.reconcile import reconcile
from openkb.models import Document


def _page(st, title: str, md: str, **body) -> dict:
    doc = st.world.doc(title, **body)
    r = st.world.save(doc, md)
    assert r.status_code in (200, 201), r.text
    return doc


def _state(st, doc_id: str) -> tuple[str, str | None]:
    with Session(st.ctx.engine) as s:
        d = s.get(Document, uuid.UUID(doc_id))
        return d.index_status, d.index_failure


def _milvus_chunk_ids(st, doc_id: str) -> list[str]:
    target = current_target(st.ctx.milvus, st.ctx.settings.milvus_active_alias)
    rows = mv.query_rows(st.ctx.milvus, target, f'document_id == "{doc_id}"', output_fields=["id"], limit=None)
    return sorted(r["id"] for r in rows)


def _pg_chunk_ids(st, doc_id: str) -> list[str]:
    with Session(st.ctx.engine) as s:
        rows = s.execute(
            text(
                "SELECT c.id::text FROM document_chunks c JOIN documents d ON d.id = c.document_id "
                "AND d.current_version_id = c.version_id WHERE d.id = :d"
            ),
            {"d": doc_id},
        ).all()
    return sorted(r[0] for r in rows)


def test_integers_outside_64_bits_are_refused_when_written(stack):
    w = stack.world
    for meta in ({"n": 10**40}, {"deep": [{"n": -(2**63) - 1}]}):
        r = w.c["owner"].post(
            "/api/documents", json={"knowledge_base_id": w.kb["id"], "title": "Big", "metadata": meta}
        )
        assert r.status_code == 422, r.text
        assert r.json()["error"] == "VALUE_OUT_OF_RANGE"
    ok = w.doc("Edge", metadata={"max": 2**63 - 1, "min": -(2**63), "flag": True})
    r = w.c["owner"].put(f"/api/documents/{ok['id']}", json={"metadata": {"n": 2**64}})
    assert r.status_code == 422 and r.json()["error"] == "VALUE_OUT_OF_RANGE"
    stack.run_jobs()


def test_a_refused_document_fails_alone_and_repair_fixes_everything_else(stack):
    """Regression: one permanent failure made ``verify --repair`` abort (exit 69) before it
    repaired anything else, and the bad page was retried six times."""
    st = stack
    tag = uuid.uuid4().hex[:8]
    docs = [_page(st, f"R{i}", f"# R{i}\n\nrepairword{tag} {i}.\n") for i in range(3)]
    st.run_jobs()
    bad = docs[1]
    with session_scope(st.ctx.engine) as s:  # as an old install or a direct SQL write could hold
        s.execute(
            text("UPDATE documents SET metadata = CAST(:m AS jsonb) WHERE id = :d"),
            {"m": '{"n": 100000000000000000000000000000000000000}', "d": bad["id"]},
        )
    target = current_target(st.ctx.milvus, st.ctx.settings.milvus_active_alias)
    for d in docs:  # Milvus lost their rows
        mv.delete_rows(st.ctx.milvus, target, filter=f'document_id == "{d["id"]}"', flush=True)

    from openkb.indexing.verify import verify
    from openkb.permissions.principal import Principal

    with session_scope(st.ctx.engine) as s:
        report = verify(st.ctx, s, Principal.system(), repair=True)
    assert report["repaired"] is True
    assert list(report["rejected"]) == [bad["id"]] and "INDEX_DATA_REJECTED" in report["rejected"][bad["id"]]
    for d in (docs[0], docs[2]):
        assert _milvus_chunk_ids(st, d["id"]) == _pg_chunk_ids(st, d["id"]) != []
    assert _state(st, bad["id"]) == ("failed", "permanent")
    from openkb.indexing.service import index_status

    with Session(st.ctx.engine) as s:
        listed = index_status(st.ctx, s)["failed"]
    assert [f["document_id"] for f in listed if f["document_id"] == bad["id"]] == [bad["id"]]

    # a permanent failure is not retried by the reconciler; an edit makes it indexable again
    with session_scope(st.ctx.engine) as s:
        s.execute(
            text("UPDATE documents SET index_checked_at = now() - interval '1 hour' WHERE id = :d"), {"d": bad["id"]}
        )
    with session_scope(st.ctx.engine) as s:
        reconcile(st.ctx, s, deadline_s=60, check_rows=False)
    assert ("index_document", {"document_id": bad["id"]}) not in st.queue.jobs
    r = st.world.c["owner"].put(f"/api/documents/{bad['id']}", json={"metadata": {"n": "1e38"}})
    assert r.status_code == 200, r.text
    assert all(exc is None for _, exc in st.run_jobs())
    assert _state(st, bad["id"]) == ("indexed", None)


def test_a_subtree_job_indexes_everything_but_the_refused_page(stack):
    st = stack
    tag = uuid.uuid4().hex[:8]
    kb = st.world.new_kb()
    docs = [_page(st, f"S{i}", f"# S{i}\n\nsubtreeword{tag} {i}.\n", kb=kb) for i in range(3)]
    st.queue.jobs.clear()  # as if the worker lost them
    with session_scope(st.ctx.engine) as s:
        s.execute(
            text("UPDATE documents SET metadata = CAST(:m AS jsonb) WHERE id = :d"),
            {"m": '{"n": -100000000000000000000000000000}', "d": docs[0]["id"]},
        )
    from openkb.indexing.jobs import reindex_subtree

    with session_scope(st.ctx.engine) as s:
        out = reindex_subtree(st.ctx, s, knowledge_base_id=kb["id"])
    assert list(out["rejected"]) == [docs[0]["id"]]
    assert _state(st, docs[0]["id"]) == ("failed", "permanent")
    for d in docs[1:]:
        assert _state(st, d["id"]) == ("indexed", None)
        assert _milvus_chunk_ids(st, d["id"]) == _pg_chunk_ids(st, d["id"]) != []


def test_duplicate_and_concurrent_index_jobs_change_nothing_more(stack):
    st = stack
    doc = _page(
        st,
        "Dup",
        "# Dup\n\n" + "\n\n".join(f"Paragraph {i} " + "of many duplicated words " * 30 for i in range(40)) + "\n",
    )
    jobs = [j for j in st.queue.jobs if j[0] == "index_document" and j[1]["document_id"] == doc["id"]]
    assert jobs
    st.run_jobs()
    first = _milvus_chunk_ids(st, doc["id"])
    assert first == _pg_chunk_ids(st, doc["id"]) and len(first) >= 2

    from openkb.indexing.jobs import index_document

    def once() -> None:
        with session_scope(st.ctx.engine) as s:
            index_document(st.ctx, s, document_id=doc["id"])

    once()  # the same job again
    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            once()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=guarded) for _ in range(4)]  # and four at once
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert _milvus_chunk_ids(st, doc["id"]) == first == _pg_chunk_ids(st, doc["id"])
    assert _state(st, doc["id"]) == ("indexed", None)


def test_the_reconciler_finds_work_a_killed_worker_lost(stack):
    st = stack
    doc = _page(st, "Lost", f"# Lost\n\nlostword{uuid.uuid4().hex[:8]}.\n")
    st.queue.jobs.clear()  # the worker dequeued the job and was killed: the job is gone
    assert _state(st, doc["id"])[0] == "pending"
    with session_scope(st.ctx.engine) as s:  # not yet past the deadline: left alone
        reconcile(st.ctx, s, deadline_s=3600, check_rows=False)
    assert st.queue.jobs == []
    with session_scope(st.ctx.engine) as s:
        out = reconcile(st.ctx, s, deadline_s=0, check_rows=False)
    assert out["documents"] >= 1 and ("index_document", {"document_id": doc["id"]}) in st.queue.jobs
    with session_scope(st.ctx.engine) as s:  # stamped: the next pass waits another deadline
        again = reconcile(st.ctx, s, deadline_s=60, check_rows=False)
    assert again["documents"] == 0
    assert all(exc is None for _, exc in st.run_jobs())
    assert _state(st, doc["id"]) == ("indexed", None)


def test_the_reconciler_repairs_rows_milvus_lost(stack):
    st = stack
    doc = _page(st, "Gone", f"# Gone\n\ngoneword{uuid.uuid4().hex[:8]}.\n")
    st.run_jobs()
    target = current_target(st.ctx.milvus, st.ctx.settings.milvus_active_alias)
    mv.delete_rows(st.ctx.milvus, target, filter=f'document_id == "{doc["id"]}"', flush=True)
    with session_scope(st.ctx.engine) as s:
        s.execute(text("UPDATE documents SET index_status = 'indexed' WHERE index_status = 'pending'"))
    with session_scope(st.ctx.engine) as s:
        out = reconcile(st.ctx, s, deadline_s=3600)
    assert out["repair"] is True and ("index_repair", {}) in st.queue.jobs
    assert all(exc is None for _, exc in st.run_jobs())
    assert _milvus_chunk_ids(st, doc["id"]) == _pg_chunk_ids(st, doc["id"]) != []
    # a page refused for its data (the subtree test's) is a known difference, not a loss: no
    # repair every pass
    with Session(st.ctx.engine) as s:
        assert s.execute(text("SELECT count(*) FROM documents WHERE index_status = 'failed'")).scalar_one() >= 1
    with session_scope(st.ctx.engine) as s:
        assert reconcile(st.ctx, s, deadline_s=3600)["repair"] is False


def test_index_verify_with_milvus_down_prints_one_line(stack, tmp_path):
    st = stack
    env = {
        **os.environ,
        "OPENKB_HOME": str(tmp_path),
        "DATABASE_URL": st.ctx.endpoints.database_url,
        "MILVUS_URI": st.ctx.endpoints.milvus_uri,
        "OPENKB_EMBEDDER_URL": "off",
    }
    st.milvus.kill()
    try:
        r = subprocess.run(
            [sys.executable, "-m", "cli.main", "index", "verify"], env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        st.milvus.start()
    assert r.returncode == 69, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "INDEX_UNAVAILABLE" in lines[0] or "unavailable" in lines[0].lower()


def test_the_reconciler_resumes_rebuilds_and_imports_left_behind(stack):
    from openkb.models import DocumentAsset, ImportJob, IndexRebuildJob, KnowledgeBase

    st = stack
    with session_scope(st.ctx.engine) as s:
        job = IndexRebuildJob(target_collection="openkb_chunks_lost_v1", target_alias="x", status="running")
        kb = s.get(KnowledgeBase, uuid.UUID(st.world.kb["id"]))
        owner = st.world.users["owner"]
        asset = DocumentAsset(
            tenant_id=kb.tenant_id,
            object_key="lost/import.zip",
            mime_type="application/zip",
            size_bytes=1,
            created_by=owner,
        )
        s.add_all([job, asset])
        s.flush()
        imp = ImportJob(
            tenant_id=kb.tenant_id,
            workspace_id=kb.workspace_id,
            knowledge_base_id=kb.id,
            source_asset_id=asset.id,
            status="running",
            converter="zip",
            created_by=owner,
        )
        s.add(imp)
        s.flush()
        job_id, import_id = str(job.id), str(imp.id)
    try:
        with session_scope(st.ctx.engine) as s:  # the import is fresh: its worker may be alive
            out = reconcile(st.ctx, s, deadline_s=3600, check_rows=False)
        assert out["rebuilds"] >= 1 and ("index_rebuild", {"job_id": job_id}) in st.queue.jobs
        assert ("import_job", {"job_id": import_id}) not in st.queue.jobs
        with session_scope(st.ctx.engine) as s:
            s.execute(
                text("UPDATE import_jobs SET updated_at = now() - interval '1 hour' WHERE id = :j"), {"j": import_id}
            )
        with session_scope(st.ctx.engine) as s:
            reconcile(st.ctx, s, deadline_s=3600, check_rows=False)
        assert ("import_job", {"job_id": import_id}) in st.queue.jobs
    finally:
        st.queue.jobs.clear()
        with session_scope(st.ctx.engine) as s:
            s.execute(text("UPDATE index_rebuild_jobs SET status = 'cancelled' WHERE id = :j"), {"j": job_id})
            s.execute(text("UPDATE import_jobs SET status = 'failed' WHERE id = :j"), {"j": import_id})
