"""``python -m openkb.runtime.pgwatch --supervisor PID --pg-dir DIR``: stop the embedded
PostgreSQL when the ``openkb up`` that owns it dies without stopping it (``kill -9``, OOM killer).

Why a separate watchdog process: ``pg_ctl`` daemonises the postmaster (own session, parent
re-set), so the ``PR_SET_PDEATHSIG`` that takes Milvus Lite, the embedder, the API and the worker
down with a killed ``up`` cannot reach it, and a dead process runs no cleanup code. The
alternatives were weaker: an ``atexit`` hook never runs on SIGKILL, and only cleaning the stale
server at the next ``openkb up`` (which ``EmbeddedServices`` also does) leaves PostgreSQL running
until someone starts OpenKB again. The watchdog is a tiny stdlib+psutil loop started by ``up``
without PDEATHSIG; it polls ``getppid()`` (re-parenting is the one signal that cannot be missed,
unlike PDEATHSIG, which fires when the *thread* that forked exits and is lost if set late) and,
once ``up`` is gone, fast-shuts-down (SIGINT) the postmaster named by ``postmaster.pid`` *only if*
that process runs on this data directory (a recycled pid is left alone), escalating to SIGQUIT
and SIGKILL. A clean ``up`` stop stops PostgreSQL itself and then sends this process SIGTERM.
SIGINT and SIGHUP are ignored: Ctrl-C in the terminal reaches the whole process group, and the
supervisor decides what a Ctrl-C means.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path


def postmaster_of(pg_dir: Path):  # type: ignore[no-untyped-def]
    """The live postmaster running on ``pg_dir``, or None."""
    import psutil

    try:
        pid = int((pg_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        if str(pg_dir.resolve()) not in " ".join(proc.cmdline()):
            return None  # a recycled pid, not our server
        return proc
    except (OSError, ValueError, psutil.Error):
        return None


def stop_postmaster(pg_dir: Path, timeout: float = 20.0) -> bool:
    """Fast shutdown, then immediate shutdown, then SIGKILL; True when nothing runs on ``pg_dir``."""
    import psutil

    for sig, wait in ((signal.SIGINT, timeout), (signal.SIGQUIT, 5.0), (signal.SIGKILL, 5.0)):
        proc = postmaster_of(pg_dir)
        if proc is None:
            return True
        try:
            proc.send_signal(sig)
            proc.wait(wait)
        except psutil.TimeoutExpired:
            continue
        except psutil.Error:
            pass
    return postmaster_of(pg_dir) is None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m openkb.runtime.pgwatch")
    parser.add_argument("--supervisor", type=int, required=True, help="pid of the openkb up that owns PostgreSQL")
    parser.add_argument("--pg-dir", type=Path, required=True)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while os.getppid() == args.supervisor:
        time.sleep(args.interval)
    stopped = stop_postmaster(args.pg_dir)
    print(
        f"openkb up (pid {args.supervisor}) is gone: embedded PostgreSQL in {args.pg_dir} "
        + ("stopped" if stopped else "could NOT be stopped"),
        file=sys.stderr,
        flush=True,
    )
    return 0 if stopped else 1


if __name__ == "__main__":
    raise SystemExit(main())
