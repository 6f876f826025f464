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
    consumer = huey.create_consumer(workers=workers, worker_type="thread", periodic=False, graceful_signal="TERM")
    from openkb.runtime.memory import freeze_startup_heap

    freeze_startup_heap()  # jobs then pay only for what they allocate (see the function)
    consumer.run()
