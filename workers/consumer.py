"""``openkb worker``: run a huey consumer in this process until SIGTERM/SIGINT."""

from __future__ import annotations

import logging

from openkb.context import AppContext


def run_consumer(ctx: AppContext, workers: int = 2) -> None:
    from workers import tasks
    from workers.queue import get_huey

    tasks.set_context(ctx)
    huey = get_huey()
    logging.getLogger("huey").setLevel(logging.INFO)
    # periodic: the reconciler (workers.tasks); and one pass now, for jobs a killed worker lost
    consumer = huey.create_consumer(workers=workers, worker_type="thread", periodic=True, graceful_signal="TERM")
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
