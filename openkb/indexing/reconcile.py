"""The reconciler: no index work is lost (docs/operations.md#index-operations).

A job can vanish: the embedded queue (SQLite huey) dequeues a task before running it, so a
``kill -9`` of the worker loses what it had in hand; an enqueue after commit can fail while the
queue is down; an outage can outlast the worker's retries. PostgreSQL still says what is owed,
so the reconciler re-enqueues from there, periodically (the worker's periodic task) and once at
worker start:

* pages whose ``index_status`` is ``pending`` (or ``failed`` for a transient reason, from
  before transient failures stayed pending) and on which no index run recorded anything for
  ``deadline_s`` (``index_checked_at``, else ``updated_at``): one ``index_document`` each. It
  stamps ``index_checked_at`` on them, so the next pass leaves them alone for another deadline:
  an outage costs one attempt per document per deadline, bounded by the reconciler, not by a
  retry count;
* a collection that lost rows (Milvus' row count differs from PostgreSQL's chunk count while
  no page waits): one ``index_repair`` (``verify --repair`` as the system);
* rebuild jobs left ``pending`` or ``running`` (their process died): ``index_rebuild`` again,
  which resumes after the last committed batch (a live one answers ``RebuildBusy``: no harm);
* import jobs left ``pending`` or ``running`` past ``import_deadline_s``: ``import_job`` again
  (an import re-run redoes only what is missing).

Everything it enqueues is idempotent, so a reconciler that runs twice, or overlaps a worker
that was only slow, costs work and never changes the result. Permanent failures (``failed``,
``index_failure = 'permanent'``) are never re-enqueued: the document must change first.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from sqlalchemy import text
from sqlmodel import Session

from openkb.context import AppContext
from openkb.indexing.rebuild import is_alive
from openkb.jobs import enqueue_after_commit

log = logging.getLogger("openkb.indexing.reconcile")

DEADLINE_S = 300
IMPORT_DEADLINE_S = 900
BATCH = 5000
MAX_KNOWN_FAILED = 1000

_STALE_SQL = text("""
UPDATE documents SET index_checked_at = now()
WHERE id IN (
    SELECT id FROM documents
    WHERE type = 'page' AND status <> 'deleted' AND deleted_at IS NULL
      AND (index_status = 'pending'
           OR (index_status = 'failed' AND index_failure IS DISTINCT FROM 'permanent'))
      AND coalesce(index_checked_at, updated_at) < now() - make_interval(secs => :deadline)
    ORDER BY coalesce(index_checked_at, updated_at)
    LIMIT :n
    FOR UPDATE SKIP LOCKED
)
RETURNING id::text, index_status
""")


def stale_documents(session: Session, *, deadline_s: float = DEADLINE_S, limit: int = BATCH) -> list[str]:
    """Pages owed an index run for longer than ``deadline_s``, stamped so the next pass skips
    them for another deadline; a transient ``failed`` one goes back to ``pending``."""
    rows = session.execute(_STALE_SQL, {"deadline": deadline_s, "n": limit}).all()
    failed = [r[0] for r in rows if r[1] == "failed"]
    if failed:
        session.execute(
            text("UPDATE documents SET index_status = 'pending' WHERE id = ANY(CAST(:ids AS uuid[]))"), {"ids": failed}
        )
    return [r[0] for r in rows]


def _rows_missing(ctx: AppContext, session: Session) -> bool:
    """The active collection's row count differs from PostgreSQL's chunk count while no page is
    waiting for its index run (then the difference is loss, not work in progress)."""
    from openkb.indexing import milvus as mv
    from openkb.indexing.profiles import current_target
    from openkb.indexing.service import pg_chunk_count

    waiting = session.execute(
        text(
            "SELECT 1 FROM documents WHERE type = 'page' AND status <> 'deleted' AND deleted_at IS NULL "
            "AND index_status = 'pending' LIMIT 1"
        )
    ).first()
    if waiting:
        return False
    target = current_target(ctx.milvus, ctx.settings.milvus_active_alias)
    if not target:
        return False
    # Pages that failed for their data are known differences: left out on both sides, or one
    # refused page would start a full repair every pass.
    failed = [
        r[0]
        for r in session.execute(
            text("SELECT id::text FROM documents WHERE type = 'page' AND index_status = 'failed' LIMIT :n"),
            {"n": MAX_KNOWN_FAILED + 1},
        ).all()
    ]
    if len(failed) > MAX_KNOWN_FAILED:
        return False  # too many to leave out: `openkb index status` lists them for the operator
    if not failed:
        return mv.count_rows(ctx.milvus, target) != pg_chunk_count(session)
    in_milvus = mv.count_rows(ctx.milvus, target, "document_id not in [" + ", ".join(f'"{d}"' for d in failed) + "]")
    failed_chunks = session.execute(
        text(
            "SELECT count(*) FROM document_chunks c JOIN documents d ON d.id = c.document_id "
            "AND d.current_version_id = c.version_id "
            "WHERE d.id = ANY(CAST(:ids AS uuid[])) AND d.status <> 'deleted' AND d.deleted_at IS NULL"
        ),
        {"ids": failed},
    ).scalar_one()
    return in_milvus != pg_chunk_count(session) - int(failed_chunks)


def reconcile(
    ctx: AppContext,
    session: Session,
    *,
    deadline_s: float = DEADLINE_S,
    import_deadline_s: float = IMPORT_DEADLINE_S,
    check_rows: bool = True,
) -> dict[str, Any]:
    """One pass; returns what it re-enqueued. The jobs go out when the caller commits
    (``enqueue_after_commit``), so they see the stamps; if the enqueue fails, the next pass
    after the deadline tries again."""
    docs = stale_documents(session, deadline_s=deadline_s)
    rebuilds = [
        r[0]
        for r in session.execute(
            text("SELECT id::text FROM index_rebuild_jobs WHERE status IN ('pending', 'running') ORDER BY started_at")
        ).all()
        if not is_alive(ctx, uuid.UUID(r[0]))  # a process holds its run lock: it is running, not lost
    ]
    imports = [
        r[0]
        for r in session.execute(
            text(
                "SELECT id::text FROM import_jobs WHERE status IN ('pending', 'running') "
                "AND updated_at < now() - make_interval(secs => :d) ORDER BY updated_at"
            ),
            {"d": import_deadline_s},
        ).all()
    ]
    repair = False
    if check_rows:
        try:
            repair = _rows_missing(ctx, session)
        except Exception as exc:  # noqa: BLE001 - Milvus down: the document pass above still counts
            log.info("reconcile: row check skipped (%s)", str(exc).splitlines()[0][:200])
    for d in docs:
        enqueue_after_commit(session, "index_document", document_id=d)
    for j in rebuilds:
        enqueue_after_commit(session, "index_rebuild", job_id=j)
    for j in imports:
        enqueue_after_commit(session, "import_job", job_id=j)
    if repair:
        enqueue_after_commit(session, "index_repair")
    out = {"documents": len(docs), "rebuilds": len(rebuilds), "imports": len(imports), "repair": repair}
    if docs or rebuilds or imports or repair:
        log.info("reconcile: re-enqueued %s", out)
    return out
