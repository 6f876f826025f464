"""Index jobs run by the huey worker (``workers/tasks.py`` dispatches ``JOB_HANDLERS``).

Every handler is idempotent: it reads the current state of PostgreSQL and makes Milvus match
(``service.sync_documents``), so a duplicated, delayed or retried job changes nothing more. A
failure is recorded on the documents concerned before it propagates: a transient one (Milvus or
the embedder unreachable) keeps them ``pending`` with ``index_attempts`` counting, retried by the
worker and then by the reconciler (``openkb.indexing.reconcile``) for as long as the outage
lasts; a permanent one (``IndexDataRejected``: Milvus refuses the data) makes them ``failed`` at
once, and in a many-document job only the refused documents fail (``sync_each``). The run that
succeeds sets them to ``indexed`` and the count back to 0.

Enqueued by the content services after commit:

* ``index_document(document_id)`` — a new current version (also: title/metadata edits).
* ``reindex_subtree(document_id=... | knowledge_base_id=...)`` — moves, status, permission-mode,
  visibility and delete/purge changes of a document or folder (the whole subtree's access fields
  may change), or of a knowledge base.
* ``index_rebuild(job_id)`` — the admin route's rebuild (``rebuild.run_rebuild``).

Enqueued by the worker itself: ``index_reconcile`` (periodically and at start) and
``index_repair`` (by the reconciler, when the active collection lost rows).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlmodel import Session

from openkb.context import AppContext
from openkb.errors import IndexError_, OpenKBError, ValidationError
from openkb.indexing import milvus as mv
from openkb.indexing.service import (
    record_failure,
    request_flush,
    sync_documents,
    sync_each,
    write_targets,
)

log = logging.getLogger("openkb.indexing.jobs")

_UUIDS = ARRAY(UUID(as_uuid=False))

_SUBTREE_SQL = text("""
WITH RECURSIVE sub AS (
    SELECT id FROM documents WHERE id = CAST(:root AS uuid)
    UNION
    SELECT d.id FROM documents d JOIN sub s ON d.parent_id = s.id
)
SELECT id::text FROM sub
""")


def _guarded(ctx: AppContext, doc_ids: list[str], fn: Any) -> Any:
    """Run ``fn``; on failure record on the documents whether it is permanent, then re-raise.

    Permanent = a non-retryable domain error (``IndexDataRejected``: Milvus refuses the data);
    the documents become ``failed`` at once. Anything else is transient: they stay ``pending``
    and are retried, by the worker and then by the reconciler, for as long as it takes."""
    try:
        return fn()
    except Exception as exc:
        permanent = isinstance(exc, OpenKBError) and not exc.retryable
        reason = f"{exc.code}: {exc.detail}" if isinstance(exc, OpenKBError) else f"{type(exc).__name__}: {exc}"
        record_failure(ctx, doc_ids, reason, permanent=permanent)
        raise


def index_document(ctx: AppContext, session: Session, *, document_id: str | uuid.UUID, **_: Any) -> dict[str, Any]:
    """Chunk the current version (once) and make every target collection hold exactly its rows."""
    did = str(uuid.UUID(str(document_id)))
    report = _guarded(ctx, [did], lambda: sync_documents(ctx, session, [did]))
    return report.as_dict()


def subtree_ids(session: Session, document_id: str) -> list[str]:
    return [r[0] for r in session.execute(_SUBTREE_SQL, {"root": document_id}).all()]


def _purge_missing(
    ctx: AppContext, session: Session, *, document_id: str | None = None, knowledge_base_id: str | None = None
) -> int:
    """Rows of a document (or knowledge base) PostgreSQL no longer has: a purge from the trash
    enqueues one job per removed document, so each job deletes its own document's rows; a
    knowledge base that is gone loses all its rows, one that exists is reconciled."""
    deleted = 0
    for t in write_targets(ctx, session, ensure=False):
        if document_id:
            deleted += mv.delete_rows(ctx.milvus, t.collection, filter=f'document_id == "{document_id}"', flush=False)
        if knowledge_base_id:
            exists = session.execute(
                text("SELECT 1 FROM knowledge_bases WHERE id = CAST(:k AS uuid)"), {"k": knowledge_base_id}
            ).first()
            if not exists:
                deleted += mv.delete_rows(
                    ctx.milvus, t.collection, filter=f'knowledge_base_id == "{knowledge_base_id}"', flush=False
                )
            else:
                deleted += _delete_orphans(ctx, session, t.collection, f'knowledge_base_id == "{knowledge_base_id}"')
        request_flush(ctx, t.collection)  # a purge enqueues a job per document: one flush for them
    return deleted


def _delete_orphans(ctx: AppContext, session: Session, collection: str, expr: str) -> int:
    """Delete rows (matching ``expr``, "" = all) whose document PostgreSQL no longer has."""
    in_milvus = {
        r["document_id"]
        for r in mv.query_rows(ctx.milvus, collection, expr or 'id != ""', output_fields=["document_id"], limit=None)
    }
    if not in_milvus:
        return 0
    present = {
        r[0]
        for r in session.execute(
            text("SELECT id::text FROM documents WHERE id = ANY(:ids)").bindparams(bindparam("ids", type_=_UUIDS)),
            {"ids": sorted(in_milvus)},
        ).all()
    }
    missing = sorted(in_milvus - present)
    deleted = 0
    for start in range(0, len(missing), 500):
        part = missing[start : start + 500]
        deleted += mv.delete_rows(
            ctx.milvus, collection, filter="document_id in [" + ", ".join(f'"{m}"' for m in part) + "]", flush=False
        )
    return deleted


def reindex_subtree(
    ctx: AppContext,
    session: Session,
    *,
    document_id: str | uuid.UUID | None = None,
    knowledge_base_id: str | uuid.UUID | None = None,
    **_: Any,
) -> dict[str, Any]:
    """Re-sync a document and everything under it (or a whole knowledge base). Access fields of
    existing rows change by partial update (Milvus embeds them again all the same:
    docs/retrieval.md#what-a-change-costs); big subtrees commit per batch."""
    if (document_id is None) == (knowledge_base_id is None):
        raise ValidationError("reindex_subtree takes document_id or knowledge_base_id")
    if document_id is not None:
        root = str(uuid.UUID(str(document_id)))
        ids = subtree_ids(session, root)
        if not ids:
            return {"purged": _purge_missing(ctx, session, document_id=root)}
    else:
        kb = str(uuid.UUID(str(knowledge_base_id)))
        ids = [
            r[0]
            for r in session.execute(
                text("SELECT id::text FROM documents WHERE knowledge_base_id = CAST(:k AS uuid) ORDER BY id"), {"k": kb}
            ).all()
        ]
        if not ids:
            return {"purged": _purge_missing(ctx, session, knowledge_base_id=kb)}
    if len(ids) == 1:
        return _guarded(ctx, ids, lambda: sync_documents(ctx, session, ids)).as_dict()  # type: ignore[no-any-return]
    # one refused document must not fail its whole subtree: batches, then one by one (sync_each)
    total, rejected = sync_each(ctx, ids)  # records its own failures, batch by batch
    if rejected:
        total["rejected"] = rejected
    return total  # type: ignore[no-any-return]


def index_rebuild(ctx: AppContext, session: Session, *, job_id: str | uuid.UUID, **_: Any) -> dict[str, Any]:
    """Run (or resume) a rebuild job created by the admin route."""
    from openkb.indexing.rebuild import RebuildBusy, run_rebuild

    try:
        job = run_rebuild(ctx, uuid.UUID(str(job_id)))
    except RebuildBusy as exc:  # another process runs it: nothing to do
        return {"skipped": exc.detail}
    if job.status == "failed":
        raise IndexError_(f"rebuild {job.id} failed: {job.error}")
    return {"job_id": str(job.id), "status": job.status, "processed": job.processed_chunks}


def index_reconcile(ctx: AppContext, session: Session, **kw: Any) -> dict[str, Any]:
    """The reconciler's periodic pass (``openkb.indexing.reconcile``)."""
    from openkb.indexing.reconcile import reconcile

    return reconcile(ctx, session, **kw)


def index_repair(ctx: AppContext, session: Session, **_: Any) -> dict[str, Any]:
    """``verify --repair`` of the active collection, as the system (enqueued by the reconciler
    when the collection lost rows)."""
    from openkb.indexing.verify import verify
    from openkb.permissions.principal import Principal

    report = verify(ctx, session, Principal.system(), repair=True)
    return {k: report.get(k) for k in ("missing", "extra", "stale", "repaired", "rejected")}


JOB_HANDLERS = {
    "index_document": index_document,
    "reindex_subtree": reindex_subtree,
    "index_rebuild": index_rebuild,
    "index_reconcile": index_reconcile,
    "index_repair": index_repair,
}
