"""``openkb up``: one process tree running the whole appliance.

Order: take the home's ``up`` lock -> check the port -> own every embedded service -> migrate
and bootstrap -> start the worker and the API as children -> wait for ``/readyz``. Any failure
before "ready" tears down whatever was started. Then every part is supervised (restarted with
backoff; see ``openkb.runtime.supervision``). SIGINT/SIGTERM stop the children first (so no
request is cut mid-transaction), then Milvus, the embedder and PostgreSQL.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable

import httpx

from openkb.config import Settings
from openkb.context import child_env
from openkb.db import dispose_engines, get_engine, session_scope
from openkb.errors import AlreadyRunning, ConfigError, ServiceUnavailable
from openkb.runtime.embedded import EmbeddedServices, http_ok, milvus_ready, spawn, stop_process
from openkb.runtime.home import Home, OwnerLock, read_record, write_record
from openkb.runtime.python import module_command
from openkb.runtime.supervision import (
    PARTS_FILE,
    Child,
    PopenChild,
    PostgresChild,
    RestartPolicy,
    Supervision,
    become_subreaper,
    reap_orphans,
)


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
    """Start the appliance, then keep every part running (docs/operations.md#supervision).

    Each part is a :class:`~openkb.runtime.supervision.Child` in one
    :class:`~openkb.runtime.supervision.Supervision`: a crash is restarted with exponential
    backoff, a crash loop of a core part stops the appliance (exit 1: let systemd or the operator
    see it), one of the embedder leaves search BM25-only. The API is a part like the others: its
    crash restarts it, it no longer takes the appliance down.
    """

    def __init__(self, settings: Settings, host: str, port: int, say: Callable[[str], None], workers: int = 2) -> None:
        self.settings = settings
        self.host = host
        self.port = port
        self.say = say
        self.workers = workers
        self.home = Home(settings.openkb_home)
        self.lock = OwnerLock(self.home, "up")
        self.services: EmbeddedServices | None = None
        self.supervision = Supervision(self.home, START_POLICY, say=say)
        self.watchdog: subprocess.Popen[bytes] | None = None
        self._stopping = False
        self._stop_signal: int | None = None
        self._env: dict[str, str] = {}
        self.timings: dict[str, float] = {}
        self.first_admin = "present"  # openkb.bootstrap.first_admin_state, read at start
        self.index_hint: str | None = None  # openkb.indexing.lexical.upgrade_hint of the active profile

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def children(self) -> dict[str, subprocess.Popen[bytes]]:
        """The API and worker processes as they are now (restarts replace them)."""
        out = {}
        for name in ("worker", "api"):
            part = self.supervision.parts.get(name)
            if part is not None and isinstance(part.child, PopenChild) and part.child.proc is not None:
                out[name] = part.child.proc
        return out

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
        # Before PostgreSQL starts: the postmaster pg_ctl daemonises is then re-parented to us, so
        # we can reap it and read its exit status (see openkb.runtime.supervision).
        become_subreaper()
        try:
            check_port(self.host, self.port)
            self.services = EmbeddedServices(self.settings, require_owner=True, say=self.say)
            endpoints = self.services.start()
            self._watch_services(endpoints)
            self.timings["services_s"] = time.perf_counter() - t0
            from openkb.health import preflight

            preflight(self.settings, endpoints)
            if endpoints.embedder_url is None and self.settings.embedded("embedder"):
                self.say("embedder unavailable: search runs BM25-only (see openkb doctor)")
            from openkb.bootstrap import ensure_instance, first_admin_state
            from openkb.migrate import upgrade

            upgrade(endpoints.database_url)
            with session_scope(get_engine(endpoints.database_url)) as s:
                ensure_instance(s)
                self.first_admin = first_admin_state(s)
            self._ensure_default_profile(endpoints)
            dispose_engines()
            self.timings["migrate_s"] = time.perf_counter() - t0
            self._env = child_env(endpoints)
            logs = self.home.log_dir
            worker_cmd = module_command("cli.main", "worker", "--workers", str(self.workers))
            api_cmd = module_command("cli.main", "serve", "--host", self.host, "--port", str(self.port))
            for name, cmd, ready in (
                ("worker", worker_cmd, None),
                ("api", api_cmd, lambda: http_ok(self._local_url + "/healthz")),
            ):
                child = PopenChild(name, lambda c=cmd, n=name: spawn(c, logs / f"{n}.log", self._env), ready)
                child.start()
                self.supervision.add(child)
            self._wait_ready()
            self.timings["ready_s"] = time.perf_counter() - t0
            self.supervision.policy = RUN_POLICY
            # From here on a stop signal only raises a flag that ``run_forever`` acts on. Switching
            # before the record is written leaves no moment where a signal ends the process
            # outside this ``try`` (that left PostgreSQL running and exited 143 instead of 0).
            for sig in STOP_SIGNALS:
                signal.signal(sig, self._flag_stop)
            # Child pids change with every restart: the record names the file that is kept current
            # (run/parts.json, openkb.runtime.supervision) instead of listing start-up pids.
            write_record(self.home, "up", {"url": self.url, "parts": str(self.home.run_dir / PARTS_FILE)})
        except BaseException:
            self.stop()
            raise

    @property
    def _local_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else "[::1]" if self.host == "::" else self.host
        return f"http://{host}:{self.port}"

    def _watch_services(self, endpoints) -> None:  # type: ignore[no-untyped-def]
        """Register the embedded services this process owns as supervised parts, and start the
        PostgreSQL watchdog (openkb.runtime.pgwatch) that stops it if we are killed."""
        services = self.services
        assert services is not None
        sources = endpoints.sources
        if sources.get("postgresql") == "embedded-own":
            self.supervision.add(
                PostgresChild(self.home.pg_dir, services.restart_postgresql, lambda: None, services.postgres_pid),
                running=True,
            )
            self._start_watchdog()
        if sources.get("milvus") == "embedded-own":
            # The readiness probe of a restarting Milvus fails by design; pymilvus would log a
            # traceback to up's terminal for each attempt.
            logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
            uri = endpoints.milvus_uri
            self.supervision.add(
                PopenChild(
                    "milvus",
                    lambda: services.respawn("milvus"),
                    lambda: milvus_ready(uri),
                    proc=services.proc("milvus"),
                ),
                running=True,
            )
        if sources.get("embedder") == "embedded-own":
            url = (endpoints.embedder_url or "").removesuffix("/v1")
            self.supervision.add(
                PopenChild(
                    "embedder",
                    lambda: services.respawn("embedder"),
                    lambda: http_ok(url + "/health"),
                    optional=True,
                    proc=services.proc("embedder"),
                ),
                running=True,
            )
        elif sources.get("embedder") == "unavailable":
            self.supervision.add(_Unavailable("embedder"), state="unavailable", detail="search is BM25-only")

    def _start_watchdog(self) -> None:
        log_path = self.home.log_dir / "supervisor.log"
        fh = open(log_path, "ab")
        self.watchdog = subprocess.Popen(
            module_command(
                "openkb.runtime.pgwatch", "--supervisor", str(os.getpid()), "--pg-dir", str(self.home.pg_dir)
            ),
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        fh.close()
        self.supervision.extra_owned = {self.watchdog.pid}

    def _stop_watchdogs(self) -> None:
        """Stop the PostgreSQL watchdog, and any other one this process started: a SIGTERM that
        lands while ``_start_watchdog`` runs leaves a watchdog whose Popen never returned (so
        ``self.watchdog`` does not name it). Left alone it would outlive ``up`` until its next
        look at its parent (a CI run caught one alive after ``up`` had exited)."""
        import psutil

        if self.watchdog is not None:
            stop_process(self.watchdog, timeout=5)
        for child in psutil.Process().children():
            try:
                if "openkb.runtime.pgwatch" in " ".join(child.cmdline()):
                    child.terminate()
                    child.wait(5)
            except psutil.Error:
                continue

    def _ensure_default_profile(self, endpoints) -> None:  # type: ignore[no-untyped-def]
        from openkb.context import AppContext
        from openkb.indexing.lexical import upgrade_hint
        from openkb.indexing.profiles import spec_of
        from openkb.indexing.service import ensure_default_profile

        ctx = AppContext.build(self.settings, endpoints)
        try:
            with session_scope(ctx.engine) as s:
                prof = ensure_default_profile(ctx, s)
                if prof is not None:
                    spec = spec_of(prof)
                    self.index_hint = upgrade_hint(prof.name, spec.lexical, spec.backend)
        finally:
            ctx.close()

    def _wait_ready(self, timeout: float = 180.0) -> None:
        """A child that crashes while starting is started again (``START_POLICY``: twice, quickly);
        one that keeps crashing fails the start with its log tail."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for part in self.supervision.tick():
                log_path = self.home.log_dir / f"{part.child.name}.log"
                tail = log_path.read_text(errors="replace")[-600:] if log_path.exists() else ""
                raise ServiceUnavailable(
                    f"the {part.child.name} process exited during start ({part.last_exit}): {tail.strip()}"
                )
            try:
                if httpx.get(self._local_url + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise ServiceUnavailable(
            f"the API did not become ready within {timeout:.0f}s (see {self.home.log_dir}/api.log)"
        )

    def _flag_stop(self, signum: int, _frame: object) -> None:
        self._stop_signal = signum
        self.supervision.stopping = True

    def run_forever(self) -> int:
        """Keep every part running until a stop signal; 1 when a core part is in a crash loop."""
        for sig in STOP_SIGNALS:  # already so after ``start``; kept for callers that skip it
            signal.signal(sig, self._flag_stop)
        while self._stop_signal is None:
            for part in self.supervision.tick():
                if not part.child.optional:
                    self.say(f"the {part.child.name} cannot be kept running; stopping OpenKB")
                    self.stop()
                    return 1
                self.say(f"the {part.child.name} is given up on: search runs BM25-only")
            if self.watchdog is not None and self.watchdog.poll() is not None:
                self._start_watchdog()
            time.sleep(0.5)
        self.say("stopping OpenKB ...")
        self.stop()
        return 0

    def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        children = self.children
        for name in ("api", "worker"):
            proc = children.get(name)
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        self.supervision.stop_all(["api", "worker"])
        if self.services is not None:
            self.services.stop()
        self.supervision.stop_all(["milvus", "embedder", "postgresql"])
        self._stop_watchdogs()
        reap_orphans(self.supervision.owned_pids())
        if self.lock.held:
            self.lock.release()


class _Unavailable(Child):
    """A part that could not start at all (the embedder without a model): shown, never restarted."""

    optional = True

    def __init__(self, name: str) -> None:
        self.name = name

    def exit_reason(self) -> str | None:
        return None

    def stop(self) -> None:
        return None

    @property
    def pid(self) -> int | None:
        return None


# While starting, a crashing child is retried twice at once; afterwards, the backoff of
# RestartPolicy's defaults applies.
START_POLICY = RestartPolicy(first_delay=0.2, factor=1.0, crash_loop_limit=2)
RUN_POLICY = RestartPolicy()


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
