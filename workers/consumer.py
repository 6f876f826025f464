"""``openkb worker``: run a huey consumer in this process until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from openkb.context import AppContext

if TYPE_CHECKING:
    from huey import Huey
    from huey.consumer import Consumer

# Longest pause between two looks at an empty SQLite queue. huey's own default backs off to 10 s,
# so on an idle appliance (the common case: people save now and then) a job waited up to 10 s
# before a worker saw it: an import's dialog said "Waiting for a worker" for seconds, an index
# job or a rebuild started late. A look at an empty queue is one indexed SELECT on a local file
# (tens of microseconds), so two threads looking twice a second cost nothing measurable.
# Redis needs no such bound: its dequeue blocks until a job arrives (docs/operations.md#job-pickup).
IDLE_POLL_MAX_S = 0.5


def build_consumer(huey: Huey, *, workers: int, periodic: bool, **options: Any) -> Consumer:
    """A thread consumer of ``huey``: the worker's, the tests' and the benchmarks' (one place
    for how a queue is polled). ``options`` go to huey's consumer as they are."""
    if not huey.storage.blocking:
        options.setdefault("max_delay", IDLE_POLL_MAX_S)
    return huey.create_consumer(workers=workers, worker_type="thread", periodic=periodic, **options)


def run_consumer(ctx: AppContext, workers: int = 2) -> None:
    from workers import tasks
    from workers.queue import get_huey

    tasks.set_context(ctx)
    huey = get_huey()
    logging.getLogger("huey").setLevel(logging.INFO)
    # periodic: the reconciler (workers.tasks); and one pass now, for jobs a killed worker lost
    consumer = build_consumer(huey, workers=workers, periodic=True, graceful_signal="TERM")
    tasks.reconcile_at_start()
    from openkb.runtime.memory import freeze_startup_heap

    freeze_startup_heap()  # jobs then pay only for what they allocate (see the function)
    try:
        consumer.run()
    finally:
        stop_flushes(ctx)


def stop_flushes(ctx: AppContext) -> None:
    """Index jobs flush their collection at most once every five seconds
    (docs/retrieval.md#flushes): the trailing flush still waiting runs now rather than with the
    next worker. A failure is logged only: the rows are in Milvus already (Lite's WAL) and its
    next flush writes them."""
    from openkb.indexing.service import flush_pending

    try:
        flush_pending(ctx)
    except Exception as exc:  # noqa: BLE001
        logging.getLogger("openkb.worker").warning("flush at stop failed: %s", exc)
