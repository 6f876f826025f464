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


def test_detached_assets_are_pruned_once_a_day():
    """The retention of assets without a document (openkb.assets.prune_detached) runs daily."""
    periodic = {t.__name__: t for t in get_huey()._registry._periodic_tasks}
    task = periodic["openkb.assets_prune"]()
    at = tasks.PRUNE_AT_HOUR
    assert task.validate_datetime(datetime.datetime(2026, 1, 1, at, 17))
    assert not task.validate_datetime(datetime.datetime(2026, 1, 1, at, 18))
    assert not task.validate_datetime(datetime.datetime(2026, 1, 1, (at + 1) % 24, 17))
    assert "assets_prune" in tasks.JOBS


class _Waits:
    """Stands in for a huey worker's stop flag: records how long each idle pause would be."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def wait(self, timeout: float) -> bool:
        self.asked.append(timeout)
        return False

    def is_set(self) -> bool:
        return False


def test_an_idle_sqlite_queue_is_looked_at_at_least_twice_a_second(tmp_path):
    """huey's own pause between looks at an empty queue grows to 10 s: on an idle appliance an
    import, a rebuild or an index job then waited that long for a worker. The worker's consumer
    bounds the pause (``IDLE_POLL_MAX_S``); an hour of idling is a few thousand empty looks."""
    from huey import SqliteHuey

    huey = SqliteHuey("idle", filename=str(tmp_path / "queue.db"))
    built = consumer.build_consumer(huey, workers=2, periodic=False)
    plain = huey.create_consumer(workers=2, worker_type="thread", periodic=False)
    pauses = {}
    for name, c in (("openkb", built), ("huey default", plain)):
        worker = c._create_worker()
        worker.stop_flag = _Waits()
        for _ in range(200):  # 200 looks at the empty queue
            worker.loop()
        pauses[name] = worker.stop_flag.asked
    assert len(pauses["openkb"]) == 200 and max(pauses["openkb"]) == consumer.IDLE_POLL_MAX_S <= 0.5
    assert max(pauses["huey default"]) > 5  # what the bound is for
    assert pauses["openkb"][0] < 0.2  # it still starts by looking often after a job


def test_a_redis_queue_blocks_instead_of_polling():
    """Redis's dequeue waits for the next job itself (no pause to bound)."""
    from huey import RedisHuey

    huey = RedisHuey("blocking", url="redis://127.0.0.1:1/0")  # never connected: only its settings are read
    built = consumer.build_consumer(huey, workers=1, periodic=False)
    assert huey.storage.blocking and built.max_delay == 10.0  # huey's default, never reached
