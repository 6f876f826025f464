"""Background jobs as seen from the domain: a name and JSON-able arguments.

The domain must not import huey, so adapters install the real queue with ``set_queue`` at
start-up (``workers.queue.HueyQueue``). Services call ``enqueue_after_commit``: the job is sent
only if the transaction commits, so a worker never picks up a job for rows it cannot see yet
and a rolled-back save enqueues nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, Protocol

from sqlmodel import Session

from openkb.db import after_commit, after_rollback

log = logging.getLogger("openkb.jobs")


_retries_left: ContextVar[int | None] = ContextVar("openkb_job_retries_left", default=None)


@contextlib.contextmanager
def job_attempt(retries_left: int) -> Iterator[None]:
    """Set by the queue adapter around one run of a job: how many retries remain if it fails."""
    token = _retries_left.set(retries_left)
    try:
        yield
    finally:
        _retries_left.reset(token)


def will_retry() -> bool:
    """Whether the running job is retried if it fails now. A handler uses it to tell a document
    "pending, retrying" from "failed, given up"; outside a worker (CLI, tests) nobody retries."""
    return bool(_retries_left.get())


class JobQueue(Protocol):
    def enqueue(self, name: str, **kwargs: Any) -> None: ...


class RecordingQueue:
    """Keeps jobs in a list; used where no worker exists (e.g. one-shot CLI commands in tests)."""

    def __init__(self) -> None:
        self.jobs: list[tuple[str, dict[str, Any]]] = []

    def enqueue(self, name: str, **kwargs: Any) -> None:
        self.jobs.append((name, kwargs))


_queue: JobQueue | None = None


def set_queue(queue: JobQueue | None) -> None:
    global _queue
    _queue = queue


def get_queue() -> JobQueue:
    if _queue is None:
        raise RuntimeError("no job queue installed: the adapter must call openkb.jobs.set_queue() at start-up")
    return _queue


def enqueue_after_commit(session: Session, name: str, **kwargs: Any) -> None:
    pending: list[tuple[str, dict[str, Any]]] = session.info.setdefault("pending_jobs", [])
    key = (name, tuple(sorted((k, str(v)) for k, v in kwargs.items())))
    seen: set[Any] = session.info.setdefault("pending_job_keys", set())
    if key in seen:  # one save = one job, however many times a service asks
        return
    seen.add(key)
    pending.append((name, kwargs))
    if len(pending) == 1:

        def flush() -> None:
            jobs = session.info.pop("pending_jobs", [])
            session.info.pop("pending_job_keys", None)
            q = get_queue()
            for n, kw in jobs:
                try:
                    q.enqueue(n, **kw)
                except Exception:  # noqa: BLE001 - the write is committed; the index verify/repair catches up
                    log.exception("could not enqueue %s %s", n, kw)

        def forget() -> None:  # a rolled-back transaction's jobs never happened
            session.info.pop("pending_jobs", None)
            session.info.pop("pending_job_keys", None)

        after_commit(session, flush)
        after_rollback(session, forget)
