"""Index verify / repair started from the admin console (docs/retrieval.md#administration).

The same check as ``openkb index verify [--repair]``: the worker calls ``verify.verify`` (never a
copy of it) for the active collection and stores its report on an ``index_verify_jobs`` row.
The console polls the row (``GET /api/admin/milvus/verify-jobs``), so a reload finds the job again
and its phase moves on without the page staying open.

Traps:

* One live job at a time: starting while one is pending or running returns that one (two
  repairs of the same collection would race each other's upserts).
* The job runs as the administrator who started it (``Principal.user``), so ``verify``'s own
  check and its ``milvus.index.repair`` audit row name them; an administrator demoted meanwhile
  makes the job fail with PERMISSION_DENIED rather than run with authority they no longer have.
* The phase and progress (``verify``'s ``progress`` callback: pages compared, then documents
  to repair) are committed in their own short transactions, else the console would see
  ``pending`` until the end; ``verify`` runs in a unit of work of its own so a failure rolls
  its writes back and the job row still records the failure.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import text, update
from sqlmodel import Session, col, select

from openkb.accounts.users import access_admin
from openkb.audit import record_audit
from openkb.context import AppContext
from openkb.db import session_scope
from openkb.errors import NotFound, OpenKBError
from openkb.indexing.verify import verify
from openkb.jobs import enqueue_after_commit
from openkb.models import IndexVerifyJob
from openkb.models._base import utcnow
from openkb.permissions.principal import Principal

log = logging.getLogger("openkb.indexing.verify_jobs")

LIVE = ("pending", "running")
JOB_NAME = "index_verify"
# A job still "running" this long after it started lost its worker (killed): it no longer blocks
# a new one. verify reads every row id of the collection: minutes at a million chunks.
STALE_AFTER = timedelta(hours=2)


def job_out(job: IndexVerifyJob) -> dict[str, Any]:
    return {
        "id": job.id,
        "repair": job.repair,
        "status": job.status,
        "phase": job.phase,
        "collection": job.collection,
        "progress": (job.report or {}).get("progress") if job.status in LIVE else None,
        "report": job.report if job.status not in LIVE and job.report else None,
        "error": job.error,
        "started_by": job.started_by,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
    }


def _expire_lost(session: Session) -> None:
    """Jobs still pending or running after ``STALE_AFTER`` lost their worker: say so, or the
    console would show them live (and its buttons disabled) for ever."""
    session.execute(
        update(IndexVerifyJob)
        .where(col(IndexVerifyJob.status).in_(LIVE), col(IndexVerifyJob.created_at) < utcnow() - STALE_AFTER)
        .values(status="failed", phase=None, error="lost: the worker stopped before it finished", finished_at=utcnow())
    )


def start_verify(session: Session, principal: Principal, *, repair: bool = False) -> tuple[IndexVerifyJob, bool]:
    """A new job (audited ``milvus.verify.start``, enqueued after commit), or the live one.
    Returns (job, created). Two administrators starting at once get one job: the check and the
    insert run under a transaction-scoped advisory lock."""
    scope = access_admin(session, principal)
    session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": "openkb.index_verify_jobs"})
    _expire_lost(session)
    live = session.exec(
        select(IndexVerifyJob)
        .where(col(IndexVerifyJob.status).in_(LIVE))
        .order_by(col(IndexVerifyJob.created_at).desc())
    ).first()
    if live is not None:
        return live, False
    job = IndexVerifyJob(tenant_id=scope.tenant_id, repair=repair, status="pending", started_by=scope.user_id)
    session.add(job)
    session.flush()
    record_audit(
        session,
        tenant_id=scope.tenant_id,
        actor=principal,
        action="milvus.verify.start",
        object_type="milvus_index",
        object_id=job.id,
        metadata={"job_id": str(job.id), "repair": repair},
    )
    enqueue_after_commit(session, JOB_NAME, job_id=str(job.id))
    return job, True


def list_verify_jobs(session: Session, principal: Principal, *, limit: int = 10) -> list[IndexVerifyJob]:
    access_admin(session, principal)
    _expire_lost(session)
    return list(session.exec(select(IndexVerifyJob).order_by(col(IndexVerifyJob.created_at).desc()).limit(limit)).all())


def get_verify_job(session: Session, principal: Principal, job_id: uuid.UUID) -> IndexVerifyJob:
    access_admin(session, principal)
    job = session.get(IndexVerifyJob, job_id)
    if job is None:
        raise NotFound("no such verify job")
    return job


def _set(ctx: AppContext, job_id: uuid.UUID, **fields: Any) -> None:
    with session_scope(ctx.engine) as s:
        job = s.get(IndexVerifyJob, job_id)
        if job is not None:
            for k, v in fields.items():
                setattr(job, k, v)
            s.add(job)


def _progress_writer(ctx: AppContext, job_id: uuid.UUID, every: float = 0.5) -> Callable[[str, int, int], None]:
    """``verify``'s progress onto the job row, at most every ``every`` seconds (and at each phase
    change), each write its own short transaction so the console sees it while verify runs."""
    last = {"at": 0.0, "phase": ""}

    def write(phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if phase == last["phase"] and now - last["at"] < every:
            return
        last.update(at=now, phase=phase)
        _set(ctx, job_id, phase=phase, report={"progress": {"phase": phase, "done": done, "total": total}})

    return write


def run_verify_job(ctx: AppContext, session: Session, *, job_id: str | uuid.UUID, **_: Any) -> dict[str, Any]:
    """The worker's handler. A finished job is left alone (a retried delivery does nothing)."""
    jid = uuid.UUID(str(job_id))
    job = session.get(IndexVerifyJob, jid)
    if job is None or job.status not in LIVE:
        return {"skipped": "not pending"}
    _set(ctx, jid, status="running", phase="compare", started_at=utcnow())
    principal = (
        Principal.user(job.started_by, job.tenant_id)
        if job.started_by is not None and job.tenant_id is not None
        else Principal.system()
    )
    try:
        with session_scope(ctx.engine) as s:
            report = verify(ctx, s, principal, repair=job.repair, progress=_progress_writer(ctx, jid))
    except OpenKBError as exc:
        log.warning("verify job %s failed: %s", jid, exc.detail)
        _set(ctx, jid, status="failed", phase=None, error=f"{exc.code}: {exc.detail}", finished_at=utcnow())
        return {"job_id": str(jid), "status": "failed"}
    except Exception as exc:  # noqa: BLE001 - recorded on the job for the console, then logged
        log.exception("verify job %s failed", jid)
        # The type first: many exceptions carry no message (TimeoutError()), and a bare "failed"
        # told the console nothing.
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        _set(ctx, jid, status="failed", phase=None, error=error[:1000], finished_at=utcnow())
        return {"job_id": str(jid), "status": "failed"}
    report = {k: (sorted(v) if isinstance(v, set) else v) for k, v in report.items()}
    _set(
        ctx,
        jid,
        status="succeeded",
        phase=None,
        collection=report.get("collection"),
        report=_jsonable(report),
        finished_at=utcnow(),
    )
    return {"job_id": str(jid), "status": "succeeded", "ok": report.get("ok")}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


JOB_HANDLERS = {JOB_NAME: run_verify_job}

__all__ = ["JOB_HANDLERS", "get_verify_job", "job_out", "list_verify_jobs", "run_verify_job", "start_verify"]
