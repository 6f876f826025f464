"""Run files: one owner per embedded service, stale owners detected, records of the dead ignored."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openkb.runtime.home import Home, OwnerLock, lock_is_held, read_record, write_record

HOLDER = """
import sys, time
from pathlib import Path
from openkb.runtime.home import Home, OwnerLock, write_record
h = Home(Path(sys.argv[1])).ensure()
lock = OwnerLock(h, "milvus")
assert lock.try_acquire()
write_record(h, "milvus", {"uri": "http://127.0.0.1:1"})
print("held", flush=True)
time.sleep(60)
"""


def test_second_owner_is_refused_and_killed_owner_is_cleared(tmp_path):
    home = Home(tmp_path).ensure()
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        assert lock_is_held(home, "milvus")
        assert not OwnerLock(home, "milvus").try_acquire()
        rec = read_record(home, "milvus")
        assert rec is not None and rec["pid"] == proc.pid
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # as if the owner crashed: no cleanup code runs
        proc.wait(10)
    # the flock died with the process; its record is still on disk but belongs to a dead pid
    assert (tmp_path / "run" / "milvus.json").exists()
    assert read_record(home, "milvus") is None
    lock = OwnerLock(home, "milvus")
    assert lock.try_acquire()
    lock.release()
    assert not (tmp_path / "run" / "milvus.json").exists()


def test_record_of_a_live_process_is_read(tmp_path):
    home = Home(tmp_path).ensure()
    write_record(home, "postgresql", {"url": "postgresql://x"})
    rec = read_record(home, "postgresql")
    assert rec is not None and rec["url"] == "postgresql://x" and rec["pid"] == os.getpid()


def test_garbage_record_is_ignored(tmp_path):
    home = Home(tmp_path).ensure()
    (tmp_path / "run" / "embedder.json").write_text("{not json")
    assert read_record(home, "embedder") is None
    (tmp_path / "run" / "embedder.json").write_text(json.dumps({"pid": 999999999, "written_at": time.time()}))
    assert read_record(home, "embedder") is None


# --- a killed `openkb up` leaves nothing behind once the next one stops ----------------------------


def processes_of_home(home: Path) -> list[str]:
    """Live processes that belong to ``home``: its path on their command line (PostgreSQL's -D,
    Milvus' --data-dir) or it as their OPENKB_HOME (API, worker, embedder)."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE or p.pid == os.getpid():
                continue
            cmd = " ".join(p.info["cmdline"] or [])
            if str(home) in cmd or p.environ().get("OPENKB_HOME") == str(home):
                found.append(f"{p.pid}: {cmd[:160]}")
        except psutil.Error:
            continue
    return found


@pytest.mark.slow
def test_after_kill_9_of_up_the_next_up_stops_everything(tmp_path):
    """kill -9 of `openkb up` orphans its PostgreSQL (pg_ctl daemonises it) and leaves its pid in
    pgserver's handle list; the next `up` reuses that server and must still stop it on SIGTERM."""
    from tests.test_cli import _free_port, _logs, start_up, up_env, wait_ready

    home = tmp_path / "home"
    env = up_env(home)
    first = start_up(env, _free_port())
    try:
        wait_ready(first, int(first.args[-1]), home)
    except BaseException:
        first.kill()
        raise
    first.kill()  # SIGKILL: no cleanup code runs
    first.wait(30)
    assert any("postgres" in p for p in processes_of_home(home))  # the orphan this test is about

    second = start_up(env, _free_port())
    try:
        wait_ready(second, int(second.args[-1]), home)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(120)
    assert second.returncode == 0, _logs(home)
    assert processes_of_home(home) == [], _logs(home)


@pytest.mark.slow
def test_sigterm_while_up_is_starting_stops_what_was_started(tmp_path):
    """SIGTERM's default action ends the process without running `stop`: the PostgreSQL that
    pg_ctl daemonised outlived it. Sent once PostgreSQL is up and before the API is ready."""
    from tests.test_cli import _free_port, _logs, start_up, up_env

    home = tmp_path / "home"
    proc = start_up(up_env(home), _free_port())
    try:
        deadline = time.monotonic() + 180
        while not (home / "run" / "postgresql.json").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError((proc.stdout.read() if proc.stdout else "") + _logs(home))
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    assert "Traceback" not in (proc.stdout.read() if proc.stdout else "")
    assert processes_of_home(home) == [], _logs(home)
