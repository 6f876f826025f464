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


@pytest.fixture
def up_home():
    """A home outside pytest's tmp_path: pytest resets its temp root to 0700 whenever another run
    starts, and (run as root) PostgreSQL runs as pgserver's own user, which must reach pg/."""
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="openkb-runtime-"))
    yield root / "home"
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_after_kill_9_of_up_and_its_watchdog_the_next_up_stops_the_orphan(up_home):
    """kill -9 of `openkb up` *and* of its PostgreSQL watchdog orphans the PostgreSQL pg_ctl
    daemonised (and leaves its pid in pgserver's handle list); the next `up` stops that orphan,
    starts its own, and leaves nothing running after SIGTERM. (With the watchdog alive the orphan
    never survives: tests/faults covers that.)"""
    import psutil

    from tests.test_cli import _free_port, _logs, start_up, up_env, wait_ready

    home = up_home
    env = up_env(home)
    first = start_up(env, _free_port())
    try:
        wait_ready(first, int(first.args[-1]), home)
        watchdogs = [
            c for c in psutil.Process(first.pid).children() if "openkb.runtime.pgwatch" in " ".join(c.cmdline())
        ]
        assert len(watchdogs) == 1
    except BaseException:
        first.kill()
        raise
    watchdogs[0].kill()
    first.kill()  # SIGKILL: no cleanup code runs
    first.wait(30)
    assert any("postgres" in p for p in processes_of_home(home))  # the orphan this test is about

    second = start_up(env, _free_port())
    try:
        wait_ready(second, int(second.args[-1]), home)
        up = read_record(Home(home), "up")  # names the current view, not start-up pids that go stale
        assert up is not None and "children" not in up, up
        assert up["parts"] == str(home / "run" / "parts.json") and Path(up["parts"]).exists()
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(120)
    assert second.returncode == 0, _logs(home)
    assert processes_of_home(home) == [], _logs(home)


@pytest.mark.slow
def test_sigterm_while_up_is_starting_stops_what_was_started(up_home):
    """SIGTERM's default action ends the process without running `stop`: the PostgreSQL that
    pg_ctl daemonised outlived it. Sent once PostgreSQL is up and before the API is ready."""
    from tests.test_cli import _free_port, _logs, start_up, up_env

    home = up_home
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


# --- supervision: restart with backoff, crash-loop limit, state file, reaping ---------------------


def _child(name: str, code: str, **kw):
    from openkb.runtime.supervision import PopenChild

    return PopenChild(name, lambda: subprocess.Popen([sys.executable, "-c", code]), **kw)


def _tick_until(sup, cond, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < deadline, sup.snapshot()
        sup.tick()
        time.sleep(0.02)


def test_crashing_part_restarts_with_growing_backoff_until_the_crash_loop_limit(tmp_path):
    from openkb.runtime.supervision import RestartPolicy, Supervision, read_parts

    home = Home(tmp_path).ensure()
    said: list[str] = []
    sup = Supervision(home, RestartPolicy(first_delay=0.05, factor=2.0, crash_loop_limit=3), say=said.append)
    child = _child("worker", "import sys; sys.exit(3)")
    child.start()
    part = sup.add(child)
    delays = []
    last_exit_at = None
    while part.state != "failed":
        sup.tick()
        if part.state == "backoff" and part.last_exit_at != last_exit_at:
            last_exit_at = part.last_exit_at
            delays.append(round(part.next_start_at - part.last_exit_at, 3))
        time.sleep(0.01)
    assert delays == [0.05, 0.1, 0.2]  # exponential backoff, then the 4th crash is a crash loop
    assert part.restarts == 3 and part.last_exit == "exited with code 3"
    assert any("crash loop" in m for m in said) and any("restarting in 0.1s" in m for m in said)
    snap = read_parts(home)  # what /readyz and doctor read
    assert snap is not None and snap["parts"]["worker"]["state"] == "failed"
    assert snap["parts"]["worker"]["restarts"] == 3
    assert "crash loop" in (tmp_path / "logs" / "supervisor.log").read_text()


def test_supervisor_log_rotates_by_size_and_a_held_writer_keeps_appending(tmp_path, monkeypatch):
    """supervisor.log (a line per restart, for as long as a part crash-loops) rotates by the same
    rule as api.log; the PostgreSQL watchdog's stdout, held open in append mode, keeps writing
    at the new end instead of into a hole."""
    from openkb.runtime.supervision import Supervision

    monkeypatch.setenv("OPENKB_LOG_MAX_BYTES", "2000")
    monkeypatch.setenv("OPENKB_LOG_BACKUPS", "2")
    home = Home(tmp_path).ensure()
    log = tmp_path / "logs" / "supervisor.log"
    sup = Supervision(home, say=lambda m: None)
    with open(log, "ab") as watchdog_out:  # as cli/supervisor.py opens it for the watchdog
        for i in range(200):
            sup.say(f"the worker process exited with code 3; restarting in 0.5s ({i:03d})")
            if i % 50 == 0:
                watchdog_out.write(f"pgwatch line {i}\n".encode())
                watchdog_out.flush()
        watchdog_out.write(b"pgwatch last line\n")
    text = log.read_text()
    assert log.stat().st_size <= 2000 + 200
    assert "(199)" in text and "pgwatch last line" in text
    assert "\x00" not in text  # the held writer continued at the new end, no hole
    assert (tmp_path / "logs" / "supervisor.log.1").exists() and (tmp_path / "logs" / "supervisor.log.2").exists()
    assert not (tmp_path / "logs" / "supervisor.log.3").exists()


def test_killed_part_is_reaped_restarted_and_reported(tmp_path):
    import psutil

    from openkb.runtime.supervision import RestartPolicy, Supervision, read_parts

    home = Home(tmp_path).ensure()
    sup = Supervision(home, RestartPolicy(first_delay=0.01), say=lambda m: None)
    child = _child("api", "import time; time.sleep(60)")
    child.start()
    part = sup.add(child, running=True)
    first = child.pid
    try:
        os.kill(first, signal.SIGKILL)
        _tick_until(sup, lambda: part.restarts == 1 and part.state == "running")
        assert part.last_exit == "killed by SIGKILL"
        assert child.pid != first
        with pytest.raises(psutil.NoSuchProcess):  # reaped: not left <defunct>
            psutil.Process(first).status()
        rec = read_parts(home)["parts"]["api"]
        assert (rec["state"], rec["pid"], rec["restarts"], rec["last_exit"]) == (
            "running",
            child.pid,
            1,
            "killed by SIGKILL",
        )
    finally:
        sup.stop_all(["api"])
    assert read_parts(home)["parts"]["api"]["state"] == "stopped"


def test_parts_file_of_a_dead_supervisor_is_ignored(tmp_path):
    from openkb.runtime.supervision import read_parts, write_parts

    home = Home(tmp_path).ensure()
    write_parts(home, {"supervisor_pid": 999999999, "parts": {"api": {"state": "running"}}})
    assert read_parts(home) is None
    write_parts(home, {"supervisor_pid": os.getpid(), "parts": {"api": {"state": "running"}}})
    assert read_parts(home)["parts"] == {"api": {"state": "running"}}


def test_parts_down_spares_only_an_optional_part_given_up_on():
    from openkb.runtime.supervision import parts_down

    parts = {
        "postgresql": {"state": "running"},
        "milvus": {"state": "backoff"},
        "embedder": {"state": "failed", "optional": True},
        "api": {"state": "starting"},
        "worker": {"state": "failed"},
    }
    assert parts_down(parts) == ["milvus", "api", "worker"]


ORPHAN = """
import os, signal, subprocess, sys, time
from openkb.runtime.supervision import REAPED, become_subreaper, describe_wait_status, reap_orphans
assert become_subreaper()
# like pg_ctl: the launcher exits, its daemon child is re-parented to us
out = subprocess.run([sys.executable, "-c",
    "import subprocess as s, sys; p = s.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
    "stdout=s.DEVNULL, stderr=s.DEVNULL); print(p.pid)"],
    capture_output=True, text=True, check=True).stdout
pid = int(out)
os.kill(pid, signal.SIGKILL)
for _ in range(200):
    if pid in reap_orphans(set()):
        break
    time.sleep(0.02)
print(describe_wait_status(REAPED[pid]))
try:
    os.kill(pid, 0)
    print("still there")
except ProcessLookupError:
    print("gone")
"""


def test_adopted_daemon_is_reaped_with_its_exit_status(tmp_path):
    """The postmaster pg_ctl daemonises is adopted by `up` (a subreaper): its kill -9 is reported
    as such and it does not stay <defunct> (a zombie postmaster blocks PostgreSQL's restart)."""
    out = subprocess.run([sys.executable, "-c", ORPHAN], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["killed", "by", "SIGKILL", "gone"]


WATCHED = """
import subprocess, sys
from pathlib import Path
pg_dir = Path(sys.argv[1])
fake = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", str(pg_dir)], start_new_session=True,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
(pg_dir / "postmaster.pid").write_text(f"{fake.pid}\\n{pg_dir}\\n")
import os
w = subprocess.Popen([sys.executable, "-m", "openkb.runtime.pgwatch", "--supervisor", str(os.getpid()),
                      "--pg-dir", str(pg_dir), "--interval", "0.05"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(fake.pid, w.pid, flush=True)
# and now this "supervisor" dies without stopping anything (os._exit: no cleanup code runs)
os._exit(0)
"""


def test_watchdog_stops_postgresql_when_the_supervisor_dies(tmp_path):
    """A stand-in postmaster (a process with the data directory on its command line, named by
    postmaster.pid) is stopped by the watchdog once its supervisor is gone."""
    import psutil

    pg_dir = tmp_path / "pg"
    pg_dir.mkdir()
    out = subprocess.run([sys.executable, "-c", WATCHED, str(pg_dir)], capture_output=True, text=True, timeout=60)
    fake_pid, watch_pid = (int(x) for x in out.stdout.split())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if psutil.Process(fake_pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    else:
        os.kill(fake_pid, signal.SIGKILL)
        raise AssertionError("the watchdog left the stand-in postmaster running")
    for pid in (watch_pid,):  # the watchdog exits once it has stopped PostgreSQL
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the watchdog did not exit")


def test_watchdog_leaves_a_recycled_pid_alone(tmp_path):
    """postmaster.pid naming a process that is not on this data directory: not ours, not stopped."""
    from openkb.runtime.pgwatch import stop_postmaster

    pg_dir = tmp_path / "pg"
    pg_dir.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (pg_dir / "postmaster.pid").write_text(f"{other.pid}\n/elsewhere\n")
        assert stop_postmaster(pg_dir, timeout=1)  # nothing of ours runs there
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_children_exiting_during_a_stop_are_not_restarted(tmp_path):
    """Ctrl-C reaches every child at once; their exits are the stop, not crashes to restart."""
    from openkb.runtime.supervision import RestartPolicy, Supervision

    home = Home(tmp_path).ensure()
    said: list[str] = []
    sup = Supervision(home, RestartPolicy(first_delay=0.0), say=said.append)
    child = _child("worker", "import sys; sys.exit(0)")
    child.start()
    part = sup.add(child, running=True)
    child.proc.wait(30)
    sup.stopping = True  # what the supervisor's signal handler sets
    sup.tick()
    assert (part.state, part.restarts, said) == ("running", 0, [])


@pytest.fixture
def keep_signal_handlers():
    """Supervisor.run_forever installs its stop handlers; pytest's own come back afterwards."""
    from cli.supervisor import STOP_SIGNALS

    saved = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _bare_supervisor(tmp_path, policy):
    from cli.supervisor import Supervisor
    from openkb.config import Settings

    said: list[str] = []
    sup = Supervisor(Settings(openkb_home=tmp_path), "127.0.0.1", 1, say=said.append)
    sup.home.ensure()
    sup.supervision.policy = policy
    sup.supervision._say = said.append
    return sup, said


def test_crash_loop_of_a_core_part_stops_the_appliance_with_exit_1(tmp_path, keep_signal_handlers):
    from openkb.runtime.supervision import RestartPolicy

    sup, said = _bare_supervisor(tmp_path, RestartPolicy(first_delay=0.0, crash_loop_limit=1))
    child = _child("worker", "import sys; sys.exit(1)")
    child.start()
    sup.supervision.add(child, running=True)
    assert sup.run_forever() == 1
    assert any("crash loop" in m for m in said) and any("stopping OpenKB" in m for m in said)
    assert sup.supervision.parts["worker"].state == "failed"


def test_crash_loop_of_the_embedder_leaves_the_rest_running(tmp_path, keep_signal_handlers):
    import threading

    from openkb.runtime.supervision import RestartPolicy

    sup, said = _bare_supervisor(tmp_path, RestartPolicy(first_delay=0.0, crash_loop_limit=1))
    embedder = _child("embedder", "import sys; sys.exit(69)", optional=True)
    api = _child("api", "import time; time.sleep(60)")
    for c in (embedder, api):
        c.start()
        sup.supervision.add(c, running=True)
    embedder_part = sup.supervision.parts["embedder"]

    def stop_when_given_up() -> None:
        deadline = time.monotonic() + 30
        while embedder_part.state != "failed" and time.monotonic() < deadline:
            time.sleep(0.05)
        sup._flag_stop(signal.SIGTERM, None)

    threading.Thread(target=stop_when_given_up, daemon=True).start()
    assert sup.run_forever() == 0  # stopped by the signal, not by the embedder's crash loop
    assert embedder_part.state == "failed" and embedder_part.last_exit == "exited with code 69"
    assert any("BM25-only" in m for m in said)
    assert sup.supervision.parts["api"].restarts == 0


def test_hang_watch_cuts_only_waits_on_a_server_that_does_not_answer():
    """openkb/runtime/dbhang.py: a wait older than probe_after on a silent server is cut (its
    socket shut down, so the blocked reader wakes up); on a server that answers the probe it is
    left alone, and that server is not probed again for probe_every seconds."""
    import socket

    from openkb.runtime.dbhang import HangWatch

    probes: list[str] = []
    answers = {"silent": False, "slow": True}
    watch = HangWatch(
        probe_after=0.0, probe_every=3600, probe=lambda dsn: probes.append(dsn) or answers[dsn], background=False
    )
    hung_a, hung_b = socket.socketpair()
    slow_a, slow_b = socket.socketpair()
    try:
        hung = watch.enter(hung_a.fileno(), "silent")
        slow = watch.enter(slow_a.fileno(), "slow")
        assert watch.check() == 1 and watch.cuts == 1
        hung_a.settimeout(5)
        assert hung_a.recv(1) == b""  # shut down: a blocked read returns at once
        slow_a.settimeout(0.01)
        with pytest.raises(TimeoutError):  # still open, still waiting for its answer
            slow_a.recv(1)
        assert sorted(probes) == ["silent", "slow"]
        watch.check()
        assert sorted(probes) == ["silent", "silent", "slow"]  # the answering server: not again yet
        watch.leave(hung)
        watch.leave(slow)
        assert watch.check() == 0  # nothing left waiting: no probe, nothing cut
        assert len(probes) == 3
    finally:
        for s in (hung_a, hung_b, slow_a, slow_b):
            s.close()


def test_children_import_the_installed_openkb_not_a_folder_of_the_working_directory(tmp_path):
    """``openkb up`` started in a folder with a ``cli/`` (or ``server/``, ``openkb/``) of its own:
    ``python -m`` put that folder first on ``sys.path`` and every child imported it instead of
    OpenKB (the API crash-looped at start). Children are started with ``-P``."""
    from openkb.runtime.python import module_command

    shadow = tmp_path / "cli"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("")
    (shadow / "main.py").write_text("print('the working directory was imported'); raise SystemExit(3)\n")
    run = subprocess.run(
        module_command("cli.main", "--version"), cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "working directory" not in run.stdout
    assert run.stdout.strip().startswith("openkb")
