"""``openkb up``: one process tree running the whole appliance.

Order: take the home's ``up`` lock -> check the port -> own every embedded service -> migrate
and bootstrap -> start the worker and the API as children -> wait for ``/readyz``. Any failure
before "ready" tears down whatever was started. SIGINT/SIGTERM stop the children first (so no
request is cut mid-transaction), then Milvus, the embedder and PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

import httpx

from openkb.config import Settings
from openkb.context import child_env
from openkb.db import dispose_engines, get_engine, session_scope
from openkb.errors import AlreadyRunning, ConfigError, ServiceUnavailable
from openkb.runtime.embedded import EmbeddedServices, spawn, stop_process
from openkb.runtime.home import Home, OwnerLock, read_record, write_record


def check_port(host: str, port: int) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                f"port {port} on {host} is in use ({exc.strerror}): stop the program using it or pass --port"
            ) from None


# What stops `openkb up` cleanly: Ctrl-C, `kill`, the terminal closing.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


class Supervisor:
    def __init__(self, settings: Settings, host: str, port: int, say: Callable[[str], None], workers: int = 2) -> None:
        self.settings = settings
        self.host = host
        self.port = port
        self.say = say
        self.workers = workers
        self.home = Home(settings.openkb_home)
        self.lock = OwnerLock(self.home, "up")
        self.services: EmbeddedServices | None = None
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self._stopping = False
        self._stop_signal: int | None = None
        self._env: dict[str, str] = {}
        self.timings: dict[str, float] = {}

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        t0 = time.perf_counter()
        # SIGTERM/SIGHUP while starting would end the process without running ``stop``, leaving the
        # PostgreSQL pg_ctl daemonised behind (children die with us, it does not): turn them into
        # an exception so the ``except BaseException`` below tears down what was started.
        for sig in STOP_SIGNALS[1:]:
            signal.signal(sig, _exit_on_signal)
        self.settings.validate_urls()
        self.home.ensure()
        if not self.lock.try_acquire():
            rec = read_record(self.home, "up") or {}
            raise AlreadyRunning(
                f"OpenKB is already running on {self.home.root} (pid {rec.get('pid', '?')}, {rec.get('url', '?')}); "
                "stop it first or use another OPENKB_HOME"
            )
        try:
            check_port(self.host, self.port)
            self.services = EmbeddedServices(self.settings, require_owner=True, say=self.say)
            endpoints = self.services.start()
            self.timings["services_s"] = time.perf_counter() - t0
            from openkb.health import preflight

            preflight(self.settings, endpoints)
            if endpoints.embedder_url is None and self.settings.embedded("embedder"):
                self.say("embedder unavailable: search runs BM25-only (see openkb doctor)")
            from openkb.bootstrap import ensure_instance
            from openkb.migrate import upgrade

            upgrade(endpoints.database_url)
            with session_scope(get_engine(endpoints.database_url)) as s:
                ensure_instance(s)
            self._ensure_default_profile(endpoints)
            dispose_engines()
            self.timings["migrate_s"] = time.perf_counter() - t0
            env = child_env(endpoints)
            self._env = env
            logs = self.home.log_dir
            self.children["worker"] = spawn(
                [sys.executable, "-m", "cli.main", "worker", "--workers", str(self.workers)], logs / "worker.log", env
            )
            self.children["api"] = spawn(
                [sys.executable, "-m", "cli.main", "serve", "--host", self.host, "--port", str(self.port)],
                logs / "api.log",
                env,
            )
            self._wait_ready()
            self.timings["ready_s"] = time.perf_counter() - t0
            # From here on a stop signal only raises a flag that ``run_forever`` acts on. Switching
            # before the record is written leaves no moment where a signal ends the process
            # outside this ``try`` (that left PostgreSQL running and exited 143 instead of 0).
            for sig in STOP_SIGNALS:
                signal.signal(sig, self._flag_stop)
            write_record(self.home, "up", {"url": self.url, "children": {k: p.pid for k, p in self.children.items()}})
        except BaseException:
            self.stop()
            raise

    def _ensure_default_profile(self, endpoints) -> None:  # type: ignore[no-untyped-def]
        from openkb.context import AppContext
        from openkb.indexing.service import ensure_default_profile

        ctx = AppContext.build(self.settings, endpoints)
        try:
            with session_scope(ctx.engine) as s:
                ensure_default_profile(ctx, s)
        finally:
            ctx.close()

    def _wait_ready(self, timeout: float = 180.0, retries: int = 2) -> None:
        """A child that crashes while starting is started again (at most ``retries`` times each);
        one that keeps crashing fails the start with its log tail."""
        deadline = time.monotonic() + timeout
        attempts = {name: 0 for name in self.children}
        while time.monotonic() < deadline:
            for name, proc in list(self.children.items()):
                if proc.poll() is not None:
                    log_path = self.home.log_dir / f"{name}.log"
                    tail = log_path.read_text(errors="replace")[-600:] if log_path.exists() else ""
                    if attempts[name] >= retries:
                        raise ServiceUnavailable(
                            f"the {name} process exited during start (code {proc.returncode}): {tail.strip()}"
                        )
                    attempts[name] += 1
                    self.say(
                        f"the {name} process exited during start (code {proc.returncode}); restarting "
                        f"({attempts[name]}/{retries})"
                    )
                    self.children[name] = spawn(proc.args, log_path, self._env)  # type: ignore[arg-type]
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise ServiceUnavailable(
            f"the API did not become ready within {timeout:.0f}s (see {self.home.log_dir}/api.log)"
        )

    def _flag_stop(self, signum: int, _frame: object) -> None:
        self._stop_signal = signum

    def run_forever(self) -> int:
        """Watch the children; restart a crashed worker, stop everything if the API dies."""
        for sig in STOP_SIGNALS:  # already so after ``start``; kept for callers that skip it
            signal.signal(sig, self._flag_stop)
        restarts = 0
        while self._stop_signal is None:
            api = self.children.get("api")
            if api is not None and api.poll() is not None:
                self.say(f"the API process exited (code {api.returncode}); stopping")
                self.stop()
                return 1
            worker = self.children.get("worker")
            if worker is not None and worker.poll() is not None and restarts < 5:
                restarts += 1
                self.say(f"worker exited (code {worker.returncode}); restarting ({restarts}/5)")
                assert self.services is not None and self.services.endpoints is not None
                self.children["worker"] = spawn(
                    [sys.executable, "-m", "cli.main", "worker"],
                    self.home.log_dir / "worker.log",
                    child_env(self.services.endpoints),
                )
            time.sleep(0.5)
        self.say("stopping OpenKB ...")
        self.stop()
        return 0

    def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        for name in ("api", "worker"):
            proc = self.children.get(name)
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name in ("api", "worker"):
            stop_process(self.children.pop(name, None), timeout=15)
        if self.services is not None:
            self.services.stop()
        if self.lock.held:
            self.lock.release()


def rss_of_tree(pid: int | None = None) -> int:
    import psutil

    p = psutil.Process(pid or os.getpid())
    total = p.memory_info().rss
    for c in p.children(recursive=True):
        try:
            total += c.memory_info().rss
        except psutil.Error:
            pass
    return total
