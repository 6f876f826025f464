"""The job queue on RedisHuey (a real redis-server) and on the embedded SQLite huey file: a job is
enqueued only when its transaction commits, a retryable failure is retried, and with two
consumers on one queue every job runs exactly once (docs/operations.md)."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

import pytest
from sqlmodel import select

from openkb import jobs
from openkb.config import Settings
from openkb.errors import ServiceUnavailable
from openkb.jobs import enqueue_after_commit
from openkb.models import AuditLog
from workers import tasks
from workers.consumer import build_consumer
from workers.queue import HueyQueue, build_huey, get_huey

FLAKY: Counter[str] = Counter()
_flaky_lock = threading.Lock()


def _flaky(ctx, session, *, note: str, fail_times: int) -> str:
    """Fails ``fail_times`` times with a retryable error, then records itself like ``ping``."""
    with _flaky_lock:
        FLAKY[note] += 1
        attempt = FLAKY[note]
    if attempt <= fail_times:
        raise ServiceUnavailable(f"attempt {attempt} of {note} fails on purpose")
    session.add(AuditLog(actor_type="system", action="worker.flaky", meta={"note": note, "attempt": attempt}))
    return "ok"


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def queue(request, app_ctx, tmp_path_factory):
    """A huey of the given kind with two consumers (separate instances, as two worker processes
    would have), installed as the process queue for the module."""
    if request.param == "redis":
        s = Settings(redis_url=request.getfixturevalue("redis_url"))
    else:
        s = Settings(openkb_home=tmp_path_factory.mktemp("queue-home"))
    hueys = [build_huey(s), build_huey(s)]
    assert type(hueys[0]).__name__ == ("RedisHuey" if request.param == "redis" else "SqliteHuey")
    get_huey()  # the process huey first: building it later would re-register its own task over ours
    previous_task, previous_queue = tasks.run_job, jobs._queue
    tasks.set_context(app_ctx)
    tasks.JOBS["test.flaky"] = _flaky
    consumers = []
    for h in hueys:
        tasks.register(h)
        c = build_consumer(h, workers=2, periodic=False, check_worker_health=False, scheduler_interval=1)
        c.start()
        consumers.append(c)
    # the enqueueing side: the last registered task (its huey shares the storage with the other)
    jobs.set_queue(HueyQueue())
    yield hueys[0]
    for c in consumers:
        c.stop(graceful=True)
    tasks.run_job = previous_task
    jobs.set_queue(previous_queue)
    tasks.JOBS.pop("test.flaky", None)
    if request.param == "redis":
        hueys[0].storage.flush_all()


def _audit(committed, action: str, notes: set[str]) -> list[AuditLog]:
    with committed() as s:
        return list(
            s.exec(
                select(AuditLog).where(AuditLog.action == action).where(AuditLog.meta["note"].astext.in_(notes))
            ).all()
        )


def _wait_for(committed, action: str, notes: set[str], timeout: float = 60.0) -> list[AuditLog]:
    deadline = time.monotonic() + timeout
    rows = _audit(committed, action, notes)
    while time.monotonic() < deadline and {r.meta["note"] for r in rows} != notes:
        time.sleep(0.1)
        rows = _audit(committed, action, notes)
    return rows


def test_enqueued_only_after_commit_and_each_job_runs_once(queue, committed):
    rolled_back = f"rb-{uuid.uuid4().hex}"
    with committed() as s:
        enqueue_after_commit(s, "ping", note=rolled_back)
        s.rollback()
    assert queue.pending_count() == 0  # nothing left the aborted transaction

    notes = {f"once-{uuid.uuid4().hex}" for _ in range(20)}
    with committed() as s:
        for n in sorted(notes):
            enqueue_after_commit(s, "ping", note=n)
            enqueue_after_commit(s, "ping", note=n)  # asked twice in one unit of work: one job
        assert queue.pending_count() == 0  # not before the commit
        s.commit()
    rows = _wait_for(committed, "worker.ping", notes)
    assert Counter(r.meta["note"] for r in rows) == Counter({n: 1 for n in notes})  # four threads, each once
    assert _audit(committed, "worker.ping", {rolled_back}) == []


def test_a_retryable_failure_is_retried(queue, committed):
    note = f"flaky-{uuid.uuid4().hex}"
    with committed() as s:
        enqueue_after_commit(s, "test.flaky", note=note, fail_times=1)
        s.commit()
    rows = _wait_for(committed, "worker.flaky", {note})
    assert [r.meta["attempt"] for r in rows] == [2]
    assert FLAKY[note] == 2
