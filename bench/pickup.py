"""How long a job waits for a worker on an idle embedded queue (docs/operations.md#job-pickup).

    python bench/pickup.py [--idle 30] [--rounds 6] [--seed 1]

Two consumers of their own SQLite huey file in this process, side by side, each with two worker
threads: the worker's (``workers.consumer.build_consumer``) and huey's consumer with its defaults
(the raw underlying operation). Each round leaves both queues idle for a random time between
half and one and a half ``--idle`` seconds (the same for both; a fixed pause would meet huey's
deterministic backoff at the same phase every round), then enqueues one job on each and measures
enqueue -> the job's start. An idle appliance is the common case (people save now and then), so
this is the wait a user sees after a pause: an import's "Waiting for a worker", a rebuild that
starts late.

Reported: per consumer, the waits, their median and maximum, the number of looks at the empty
queue per second while idle (what the bound costs), and the ratio of the default's median wait to
the worker's. Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from huey import SqliteHuey  # noqa: E402
from huey.storage import SqliteStorage  # noqa: E402

from workers.consumer import IDLE_POLL_MAX_S, build_consumer  # noqa: E402


class CountingStorage(SqliteStorage):
    """huey's SQLite storage, counting its dequeues (looks at the queue)."""

    looks = 0

    def dequeue(self):  # type: ignore[override]
        type(self).looks += 1
        return super().dequeue()


def queue(folder: Path, name: str) -> tuple[SqliteHuey, Any, dict[str, float], type[CountingStorage]]:
    """A SQLite huey of its own, its one task (records when it starts, by key), the start times
    and its counting storage class."""
    storage = type(f"Counting_{name}", (CountingStorage,), {"looks": 0})
    huey = SqliteHuey(name, filename=str(folder / f"{name}.db"), storage_class=storage)
    started: dict[str, float] = {}
    lock = threading.Lock()

    @huey.task(name="bench.mark")
    def mark(key: str) -> None:
        with lock:
            started[key] = time.perf_counter()

    return huey, mark, started, storage


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--idle", type=float, default=30.0, help="mean seconds each queue stays idle before a job")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    folder = Path(tempfile.mkdtemp(prefix="openkb-bench-pickup-"))
    sides = {}
    for name in ("openkb", "default"):
        huey, mark, started, storage = queue(folder, name)
        c = (
            build_consumer(huey, workers=2, periodic=False, check_worker_health=False)
            if name == "openkb"
            else huey.create_consumer(workers=2, worker_type="thread", periodic=False, check_worker_health=False)
        )
        c.start()
        sides[name] = {"huey": huey, "mark": mark, "started": started, "storage": storage, "consumer": c, "waits": []}
    idle_looks = {n: 0 for n in sides}
    idle_s = 0.0
    try:
        for r in range(args.rounds):
            before = {n: s["storage"].looks for n, s in sides.items()}
            pause = rng.uniform(args.idle / 2, args.idle * 1.5)
            time.sleep(pause)
            idle_s += pause
            for n, s in sides.items():
                idle_looks[n] += s["storage"].looks - before[n]
            sent = {}
            for n, s in sides.items():
                key = f"{n}-{r}"
                sent[n] = time.perf_counter()
                s["mark"](key)
            deadline = time.perf_counter() + 30
            while time.perf_counter() < deadline and not all(f"{n}-{r}" in s["started"] for n, s in sides.items()):
                time.sleep(0.005)
            for n, s in sides.items():
                got = s["started"].get(f"{n}-{r}")
                s["waits"].append(round(got - sent[n], 3) if got else None)
            print(
                f"round {r + 1} (idle {pause:.1f} s): "
                + ", ".join(f"{n} {s['waits'][-1]} s" for n, s in sides.items()),
                flush=True,
            )
    finally:
        for s in sides.values():
            s["consumer"].stop(graceful=True)
        shutil.rmtree(folder, ignore_errors=True)
    out: dict[str, object] = {"idle_s": args.idle, "rounds": args.rounds, "idle_poll_max_s": IDLE_POLL_MAX_S}
    for n, s in sides.items():
        waits = [w for w in s["waits"] if w is not None]
        out[f"{n}_waits_s"] = s["waits"]
        out[f"{n}_p50_s"] = round(statistics.median(waits), 3) if waits else None
        out[f"{n}_max_s"] = max(waits) if waits else None
        out[f"{n}_idle_looks_per_s"] = round(idle_looks[n] / idle_s, 2)
        print(
            f"{n:8} wait p50 {out[f'{n}_p50_s']} s, max {out[f'{n}_max_s']} s; "
            f"{out[f'{n}_idle_looks_per_s']} looks/s at the empty queue"
        )
    if out["openkb_p50_s"] and out["default_p50_s"]:
        out["ratio_default_over_openkb"] = round(out["default_p50_s"] / out["openkb_p50_s"], 1)  # type: ignore[operator]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
