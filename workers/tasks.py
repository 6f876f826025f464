"""Job names -> domain handlers. The huey task only opens a unit of work and dispatches.

Handlers are ``fn(ctx, session, **kwargs)`` in ``openkb``; they must be idempotent (a retried
or duplicated job changes nothing more). Retryable domain errors (Milvus down, ...) are retried
with exponential backoff; others fail the job once and are logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from huey import Huey, crontab

from openkb.assets import JOB_HANDLERS as ASSET_JOB_HANDLERS
from openkb.context import AppContext
from openkb.db import session_scope
from openkb.errors import OpenKBError
from openkb.importing.jobs import JOB_HANDLERS as IMPORT_JOB_HANDLERS
from openkb.indexing.jobs import JOB_HANDLERS as INDEX_JOB_HANDLERS
from openkb.indexing.verify_jobs import JOB_HANDLERS as VERIFY_JOB_HANDLERS
from openkb.jobs import job_attempt
from openkb.logthrottle import throttled

log = logging.getLogger("openkb.worker")

Handler = Callable[..., Any]
JOBS: dict[str, Handler] = {}
run_job: Any = None
_ctx: AppContext | None = None


def job(name: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        JOBS[name] = fn
        return fn

    return deco


def set_context(ctx: AppContext) -> None:
    global _ctx
    _ctx = ctx


def get_context() -> AppContext:
    global _ctx
    if _ctx is None:
        from openkb.config import get_settings
        from openkb.runtime.embedded import EmbeddedServices

        settings = get_settings()
        # A worker started by the supervisor gets every URL in its env; standalone it borrows
        # a running instance's embedded services (or starts its own).
        svc = EmbeddedServices(settings)
        _ctx = AppContext.build(settings, svc.start())
        _ctx._services = svc  # type: ignore[attr-defined]  # keep them alive for the process
    return _ctx


@job("ping")
def ping(ctx: AppContext, session: Any, *, note: str = "") -> str:
    """Proves a consumer runs: writes an audit row that a test (or doctor) can look for."""
    from openkb.models import AuditLog

    session.add(AuditLog(actor_type="system", action="worker.ping", meta={"note": note}))
    return "pong"


# Domain packages that own jobs expose ``JOB_HANDLERS = {name: fn}``, registered here by a plain
# import: a worker that cannot load a handler fails at start, not on the first job of that name.
JOBS.update(INDEX_JOB_HANDLERS)
JOBS.update(IMPORT_JOB_HANDLERS)
JOBS.update(VERIFY_JOB_HANDLERS)
JOBS.update(ASSET_JOB_HANDLERS)


def dispatch(name: str, kwargs: dict[str, Any]) -> Any:
    fn = JOBS.get(name)
    if fn is None:
        raise OpenKBError(f"unknown job {name!r}")
    ctx = get_context()
    with session_scope(ctx.engine) as session:
        return fn(ctx, session, **kwargs)


# How often the reconciler runs (openkb.indexing.reconcile): it re-enqueues index work a lost or
# exhausted job left behind, so transient failures are retried for as long as an outage lasts.
RECONCILE_EVERY_MINUTES = 2
# Once a day (UTC hour), detached assets past ASSET_RETENTION_DAYS are deleted (openkb.assets).
PRUNE_AT_HOUR = 3
# At worker start, pages pending this long are re-enqueued at once: the jobs a killed worker had
# dequeued are gone (a duplicate of one still queued is harmless: jobs are idempotent).
RECONCILE_AT_START_DEADLINE_S = 30


def register(huey: Huey) -> None:
    global run_job

    @huey.task(retries=6, retry_delay=1, retry_backoff=2, name="openkb.run_job", context=True)
    def _run_job(name: str, kwargs: dict[str, Any], task: Any = None) -> Any:
        # The handler learns whether a failure now is retried (huey counts retries down).
        # Transient failures outlive these retries through the reconciler, so an outage is
        # logged once a minute with a count, not once per job and attempt.
        try:
            with job_attempt(task.retries if task is not None else 0):
                return dispatch(name, kwargs)
        except OpenKBError as exc:
            if exc.retryable:
                throttled(
                    log, f"retry|{name}|{exc.code}", logging.WARNING, "job %s failed (%s), will retry", name, exc.detail
                )
                raise
            log.error("job %s failed permanently: %s %s", name, exc.code, exc.detail)
            return {"error": exc.code, "detail": exc.detail}

    @huey.periodic_task(crontab(minute=f"*/{RECONCILE_EVERY_MINUTES}"), name="openkb.reconcile")
    def _reconcile() -> Any:
        try:
            return dispatch("index_reconcile", {})
        except OpenKBError as exc:  # PostgreSQL down: the next period tries again
            throttled(log, "reconcile", logging.WARNING, "reconcile skipped: %s %s", exc.code, exc.detail)
            return None

    @huey.periodic_task(crontab(hour=str(PRUNE_AT_HOUR), minute="17"), name="openkb.assets_prune")
    def _prune_assets() -> Any:
        try:
            return dispatch("assets_prune", {})
        except OpenKBError as exc:  # PostgreSQL down: tomorrow's pass catches up
            throttled(log, "assets_prune", logging.WARNING, "asset prune skipped: %s %s", exc.code, exc.detail)
            return None

    run_job = _run_job


def reconcile_at_start() -> None:
    """Queue one reconciler pass with a short deadline (see RECONCILE_AT_START_DEADLINE_S)."""
    try:
        run_job("index_reconcile", {"deadline_s": RECONCILE_AT_START_DEADLINE_S})
    except Exception as exc:  # noqa: BLE001 - the periodic pass catches up
        log.warning("could not queue the reconciler at start: %s", exc)
