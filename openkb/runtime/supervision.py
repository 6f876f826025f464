"""Supervision of the parts ``openkb up`` runs: restart with backoff, crash-loop limit, state file.

Every part (PostgreSQL, Milvus Lite, the embedder, the worker, the API) is a :class:`Child`: it
can be (re)started, asked whether it has exited and why, and probed for readiness. The
:class:`Supervision` loop steps each part through ``starting -> running -> backoff -> starting``
and gives up (``failed``) when a part crashes more than ``crash_loop_limit`` times within
``crash_loop_window`` seconds. Its view is written to ``$OPENKB_HOME/run/parts.json`` on every
change, which is what ``/readyz`` and ``openkb doctor`` read (see docs/operations.md#supervision).

Traps this module exists to avoid:

- A killed child stays ``<defunct>`` until its parent waits for it, and a zombie still "exists"
  for ``kill(pid, 0)`` and for ``psutil.pid_exists``: PostgreSQL then refuses to start on a
  ``postmaster.pid`` naming it. ``up`` makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``)
  so the postmaster that ``pg_ctl`` daemonises is re-parented to ``up`` instead of init, and
  :func:`reap_orphans` waits for every exited child that no ``Popen`` owns (a ``waitpid(-1)``
  would steal ``Popen``'s exit codes and leave ``returncode`` 0 for a ``kill -9``).
- The exit status of an adopted postmaster is only known to whoever reaps it, so the reaper keeps
  it in :data:`REAPED` for :class:`PostgresChild` to report ("killed by SIGKILL").
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openkb.runtime.home import Home
from openkb.runtime.logfiles import log_limits, rotate_if_over

log = logging.getLogger("openkb.runtime.supervision")

PARTS_FILE = "parts.json"
PR_SET_CHILD_SUBREAPER = 36

# Exit statuses of children reaped by :func:`reap_orphans`, by pid (bounded: oldest dropped).
REAPED: dict[int, int] = {}


def become_subreaper() -> bool:
    """Adopt orphaned descendants (the postmaster pg_ctl daemonises) so they can be reaped here."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except OSError:
        return False


def reap_orphans(owned: set[int]) -> list[int]:
    """Wait for every exited child of this process whose pid is not in ``owned`` (the pids some
    ``Popen`` will wait for itself); return the reaped pids."""
    import psutil

    reaped = []
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return reaped
    for child in children:
        if child.pid in owned:
            continue
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                continue
            pid, status = os.waitpid(child.pid, os.WNOHANG)
        except (psutil.Error, ChildProcessError, OSError):
            continue
        if pid:
            REAPED[pid] = status
            reaped.append(pid)
    while len(REAPED) > 256:
        REAPED.pop(next(iter(REAPED)))
    return reaped


def describe_returncode(code: int | None) -> str:
    """``Popen.returncode`` in words: ``-9`` is "killed by SIGKILL", ``1`` "exited with code 1"."""
    if code is None:
        return "running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def describe_wait_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return describe_returncode(-os.WTERMSIG(status))
    return describe_returncode(os.WEXITSTATUS(status))


# --- children ----------------------------------------------------------------------------------


class Child:
    """One supervised part. Subclasses say how to start it, whether it died, and when it is ready."""

    name: str = "?"
    #: an optional part that keeps crashing is given up on while the rest keeps running (the
    #: embedder: search falls back to BM25); a core part that does stops the appliance.
    optional: bool = False

    def start(self) -> None:
        raise NotImplementedError

    def exit_reason(self) -> str | None:
        """None while alive; why it is gone otherwise."""
        raise NotImplementedError

    def ready(self) -> bool:
        return True

    def stop(self) -> None:
        raise NotImplementedError

    @property
    def pid(self) -> int | None:
        raise NotImplementedError

    def owned_pids(self) -> set[int]:
        """Pids a ``Popen`` of this child will wait for itself (kept from :func:`reap_orphans`)."""
        return set()


class PopenChild(Child):
    """A child process started with ``spawn`` (Milvus Lite, the embedder, the worker, the API)."""

    def __init__(
        self,
        name: str,
        launch: Callable[[], subprocess.Popen[bytes]],
        ready: Callable[[], bool] | None = None,
        *,
        optional: bool = False,
        proc: subprocess.Popen[bytes] | None = None,
        stop_timeout: float = 15.0,
    ) -> None:
        self.name = name
        self._launch = launch
        self._ready = ready
        self.optional = optional
        self.proc = proc
        self.stop_timeout = stop_timeout

    def start(self) -> None:
        self.proc = self._launch()

    def exit_reason(self) -> str | None:
        if self.proc is None:
            return "not started"
        code = self.proc.poll()  # also reaps it: no <defunct> left behind
        return None if code is None else describe_returncode(code)

    def ready(self) -> bool:
        if self._ready is None:
            return True
        try:
            return bool(self._ready())
        except Exception:  # noqa: BLE001 - a probe fails until the part is ready
            return False

    def stop(self) -> None:
        from openkb.runtime.embedded import stop_process

        stop_process(self.proc, timeout=self.stop_timeout)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def owned_pids(self) -> set[int]:
        return {self.proc.pid} if self.proc is not None else set()


class PostgresChild(Child):
    """The PostgreSQL that pgserver starts through ``pg_ctl`` (daemonised: not a ``Popen`` of ours).

    Watched by the postmaster's pid *and* ``postmaster.pid``: the pid gone (or a zombie), or the
    file missing or naming another process, is an exit. Restarted through pgserver again (same
    data directory, same socket, so the URL the API and worker hold stays valid).
    """

    name = "postgresql"

    def __init__(self, pg_dir: Path, restart: Callable[[], int], stop: Callable[[], None], pid: int | None) -> None:
        self.pg_dir = pg_dir
        self._restart = restart
        self._stop = stop
        self._pid = pid

    def start(self) -> None:
        self._pid = self._restart()

    @property
    def pid(self) -> int | None:
        return self._pid

    def exit_reason(self) -> str | None:
        import psutil

        pid = self._pid
        if pid is None:
            return "not started"
        if pid in REAPED:
            return f"{describe_wait_status(REAPED[pid])} (postmaster pid {pid})"
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return f"exited (postmaster pid {pid})"
        except psutil.Error:
            return f"is gone (postmaster pid {pid})"
        if postmaster_pid(self.pg_dir) != pid:
            return f"is gone (postmaster.pid no longer names pid {pid})"
        return None

    def stop(self) -> None:
        self._stop()


def postmaster_pid(pg_dir: Path) -> int | None:
    try:
        return int((pg_dir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


# --- policy and state --------------------------------------------------------------------------


@dataclass
class RestartPolicy:
    """Exponential backoff ``first_delay * factor**(n-1)`` capped at ``max_delay``, where n counts
    crashes since the part last ran ``stable_after`` seconds; more than ``crash_loop_limit``
    crashes within ``crash_loop_window`` seconds is a crash loop and the part is given up on."""

    first_delay: float = 0.5
    factor: float = 2.0
    max_delay: float = 30.0
    stable_after: float = 60.0
    crash_loop_limit: int = 6
    crash_loop_window: float = 300.0
    start_timeout: float = 180.0

    def delay(self, consecutive: int) -> float:
        return float(min(self.max_delay, self.first_delay * self.factor ** max(0, consecutive - 1)))


@dataclass
class Part:
    child: Child
    state: str = "starting"  # starting | running | backoff | failed | stopped
    restarts: int = 0
    last_exit: str | None = None
    last_exit_at: float | None = None
    started_at: float = field(default_factory=time.time)
    ready_at: float | None = None
    next_start_at: float | None = None
    consecutive: int = 0
    crashes: deque[float] = field(default_factory=deque)
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "pid": self.child.pid if self.state in ("starting", "running") else None,
            "restarts": self.restarts,
            "last_exit": self.last_exit,
            "last_exit_at": self.last_exit_at,
            "since": self.ready_at if self.state == "running" else self.started_at,
            "next_start_at": self.next_start_at if self.state == "backoff" else None,
            "optional": self.child.optional,
            "detail": self.detail,
        }


class Supervision:
    """The restart loop's state machine; ``tick()`` is called by ``openkb up`` twice a second."""

    def __init__(
        self,
        home: Home,
        policy: RestartPolicy | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.home = home
        self.policy = policy or RestartPolicy()
        self.parts: dict[str, Part] = {}
        self._say = say or log.info
        self._written: str = ""
        # Set from a signal handler: Ctrl-C reaches the whole process group, so the children exit
        # on their own at the same moment; that is a stop, not a crash to restart.
        self.stopping = False
        # pids of other Popen children of this process (the PostgreSQL watchdog): never reaped here
        self.extra_owned: set[int] = set()

    def say(self, msg: str) -> None:
        """Tell the terminal and append to ``logs/supervisor.log``, which rotates by size like
        ``api.log`` (one rule: openkb.runtime.logfiles; a crash-looping part adds a line per
        restart for as long as ``up`` runs)."""
        self._say(msg)
        path = self.home.log_dir / "supervisor.log"
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(time.strftime("%Y-%m-%dT%H:%M:%S ") + msg + "\n")
                fh.flush()
                rotate_if_over(str(path), fh.fileno(), *log_limits())
        except OSError:
            pass

    def add(self, child: Child, *, running: bool = False, state: str | None = None, detail: str = "") -> Part:
        part = Part(child, state=state or ("running" if running else "starting"), detail=detail)
        if part.state == "running":
            part.ready_at = time.time()
        self.parts[child.name] = part
        self.write()
        return part

    def owned_pids(self) -> set[int]:
        pids: set[int] = set(self.extra_owned)
        for p in self.parts.values():
            pids |= p.child.owned_pids()
        return pids

    def tick(self) -> list[Part]:
        """Step every part once; returns the parts that were just given up on."""
        reap_orphans(self.owned_pids())
        failed = []
        for part in self.parts.values():
            if self.stopping:
                break
            if self._step(part):
                failed.append(part)
        self.write()
        return failed

    def _step(self, part: Part) -> bool:
        now = time.time()
        name = part.child.name
        if part.state in ("starting", "running"):
            reason = part.child.exit_reason()
            if reason is None and part.state == "starting":
                if part.child.ready():
                    part.state = "running"
                    part.ready_at = now
                    if part.restarts:
                        self.say(f"the {name} is back (pid {part.child.pid}) after {now - part.started_at:.1f}s")
                    return False
                if now - part.started_at > self.policy.start_timeout:
                    part.child.stop()
                    reason = f"not ready within {self.policy.start_timeout:.0f}s"
            if reason is None:
                return False
            return self._crashed(part, reason, now)
        if part.state == "backoff" and part.next_start_at is not None and now >= part.next_start_at:
            part.restarts += 1
            part.started_at = now
            part.state = "starting"
            try:
                part.child.start()
            except Exception as exc:  # noqa: BLE001 - a failed start is a crash like any other
                return self._crashed(
                    part, f"restart failed: {str(exc).splitlines()[0][:200] if str(exc) else exc!r}", now
                )
            self.say(f"restarted the {name} (pid {part.child.pid}; restart {part.restarts})")
        return False

    def _crashed(self, part: Part, reason: str, now: float) -> bool:
        name = part.child.name
        ran_for = now - (part.ready_at or part.started_at) if part.state == "running" else 0.0
        if ran_for >= self.policy.stable_after:
            part.consecutive = 0
        part.consecutive += 1
        part.last_exit = reason
        part.last_exit_at = now
        part.crashes.append(now)
        while part.crashes and part.crashes[0] < now - self.policy.crash_loop_window:
            part.crashes.popleft()
        if len(part.crashes) > self.policy.crash_loop_limit:
            part.state = "failed"
            part.next_start_at = None
            self.say(
                f"the {name} ({reason}) crashed {len(part.crashes)} times within "
                f"{self.policy.crash_loop_window:.0f}s: crash loop, not restarting it "
                f"(see {self.home.log_dir})"
            )
            return True
        delay = self.policy.delay(part.consecutive)
        part.state = "backoff"
        part.next_start_at = now + delay
        self.say(f"the {name} process {reason}; restarting in {delay:.1f}s")
        return False

    def stop_all(self, order: list[str]) -> None:
        for name in order:
            part = self.parts.get(name)
            if part is None:
                continue
            if part.state != "failed":
                part.state = "stopped"
            try:
                part.child.stop()
            except Exception:  # noqa: BLE001 - stopping the rest matters more
                log.exception("stopping the %s", name)
        self.write()

    def snapshot(self) -> dict[str, Any]:
        return {
            "supervisor_pid": os.getpid(),
            "updated_at": time.time(),
            "parts": {name: p.as_dict() for name, p in self.parts.items()},
        }

    def write(self) -> None:
        if not self.parts and not (self.home.run_dir / PARTS_FILE).exists():
            return  # nothing was started (e.g. `up` refused a busy port): leave no state behind
        snap = self.snapshot()
        key = json.dumps(snap["parts"], sort_keys=True)
        if key == self._written:
            return
        self._written = key
        write_parts(self.home, snap)


def write_parts(home: Home, snap: dict[str, Any]) -> None:
    path = home.run_dir / PARTS_FILE
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(snap))
    tmp.replace(path)


def read_parts(home: Home) -> dict[str, Any] | None:
    """The live supervisor's view of its parts, or None (no ``openkb up``, or a dead one's file)."""
    import psutil

    try:
        data = json.loads((home.run_dir / PARTS_FILE).read_text())
    except (OSError, ValueError):
        return None
    pid = data.get("supervisor_pid")
    try:
        if not isinstance(pid, int) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.Error:
        return None
    return data if isinstance(data.get("parts"), dict) else None


#: states in which a part does not serve; an optional part given up on is a degradation instead
DOWN_STATES = ("starting", "backoff", "failed", "stopped")


def parts_down(parts: dict[str, Any]) -> list[str]:
    """Parts that make the appliance not ready: any not running, except an optional part (the
    embedder) given up on or unavailable, which only degrades search to BM25."""
    down = []
    for name, p in parts.items():
        state = p.get("state")
        if state == "running":
            continue
        if p.get("optional") and state in ("failed", "unavailable"):
            continue
        down.append(name)
    return down
