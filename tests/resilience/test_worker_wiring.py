"""The worker runs the reconciler: periodically (a huey periodic task; the consumer is started with
periodic tasks on) and once at start, for the jobs a killed worker had in hand."""

from __future__ import annotations

import datetime
import inspect

from workers import consumer, tasks
from workers.queue import get_huey


def test_the_reconciler_is_a_periodic_task_and_runs_at_worker_start():
    huey = get_huey()
    periodic = {t.__name__: t for t in huey._registry._periodic_tasks}
    assert "openkb.reconcile" in periodic
    task = periodic["openkb.reconcile"]()
    every = tasks.RECONCILE_EVERY_MINUTES
    assert task.validate_datetime(datetime.datetime(2026, 1, 1, 0, every))
    assert not task.validate_datetime(datetime.datetime(2026, 1, 1, 0, every + 1))
    assert {"index_reconcile", "index_repair"} <= set(tasks.JOBS)
    src = inspect.getsource(consumer.run_consumer)
    assert "periodic=True" in src and "reconcile_at_start()" in src
