"""Start or find the embedded services (PostgreSQL, Milvus Lite, the embedder).

A component configured by env var is external and used as is. An embedded one is owned by the
first process that locks it (see ``home.py``); ``openkb up`` insists on owning them all, while
short commands (``doctor``, ``user create`` ...) borrow whatever a live ``openkb up`` runs and
only start their own when nothing is running. Children get PDEATHSIG so a killed owner never
leaves a Milvus or embedder process behind holding the data directory.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openkb.config import Settings
from openkb.errors import ConfigError, ServiceUnavailable
from openkb.runtime.home import Home, OwnerLock, read_record, write_record
from openkb.runtime.lite_server import RECORD_ENV, lite_command
from openkb.runtime.python import module_command

log = logging.getLogger("openkb.runtime")

COMPONENTS = ("postgresql", "milvus", "embedder")


@dataclass
class Endpoints:
    database_url: str
    milvus_uri: str
    milvus_token: str | None
    embedder_url: str | None
    queue: str
    home: Path
    sources: dict[str, str] = field(default_factory=dict)  # component -> embedded-own|embedded-shared|external


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex((host, port)) == 0


def stable_port(home: Home, name: str) -> int:
    """A port remembered in ``$OPENKB_HOME/ports.json``.

    The embedder's URL is baked into Milvus collection functions, so it must not change
    between restarts; a port taken by something else is a clear error, not a silent move.
    """
    path = home.root / "ports.json"
    try:
        ports = json.loads(path.read_text())
    except (OSError, ValueError):
        ports = {}
    if name not in ports:
        ports[name] = free_port()
        path.write_text(json.dumps(ports))
    return int(ports[name])


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def spawn(cmd: list[str], log_path: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    fh = open(log_path, "ab")
    return subprocess.Popen(
        cmd,
        stdout=fh,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        preexec_fn=_die_with_parent,
    )


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    proc: subprocess.Popen[bytes] | None = None,
    log_path: Path | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-800:] if log_path and log_path.exists() else ""
            raise ServiceUnavailable(
                f"{what} exited during start (code {proc.returncode}); log {log_path}: {tail.strip()}"
            )
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - readiness probes fail until ready
            pass
        time.sleep(0.1)
    raise ServiceUnavailable(f"{what} did not become ready within {timeout:.0f}s (log: {log_path})")


# pymilvus pings every 10 s even when idle; gRPC servers (Milvus Lite's among them) answer an
# idle client that pings more often than every 5 min with GOAWAY "too_many_pings".
MILVUS_GRPC_OPTIONS = {"grpc.keepalive_time_ms": 300_000, "grpc.keepalive_permit_without_calls": False}


def milvus_client(uri: str, token: str | None = None, db_name: str = "", timeout: float = 30.0) -> Any:
    from pymilvus import MilvusClient

    return MilvusClient(uri=uri, token=token or "", db_name=db_name, timeout=timeout, grpc_options=MILVUS_GRPC_OPTIONS)


def milvus_ready(uri: str, token: str | None = None, timeout: float = 2.0) -> bool:
    client = milvus_client(uri, token, timeout=timeout)
    try:
        client.list_collections()
        return True
    finally:
        client.close()


def http_ok(url: str, timeout: float = 1.0) -> bool:
    import httpx

    return httpx.get(url, timeout=timeout).status_code == 200


def forget_pgserver_handles(pg_dir: Path) -> None:
    """Reset pgserver's list of processes using this data directory.

    pgserver counts its users in ``pg/.handle_pids.json`` and stops PostgreSQL only when the last
    one leaves. A killed owner (``kill -9`` of ``openkb up``) never removes its pid, so the next
    owner reuses the still-running server but, seeing a second "user", never stops it: every
    later clean stop left PostgreSQL running. Only the holder of the home's ``postgresql`` lock
    calls pgserver (everyone else borrows through the run record), so when we are about to,
    nobody else can be listed: the list is stale by construction and is cleared.
    """
    (pg_dir / ".handle_pids.json").unlink(missing_ok=True)


def stop_postgres_of(pg_dir: Path, timeout: float = 30.0) -> None:
    """Fast-shutdown (SIGINT) the postmaster ``pg/postmaster.pid`` names, if it runs on ``pg_dir``."""
    import psutil

    try:
        pid = int((pg_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        proc = psutil.Process(pid)
        if str(pg_dir.resolve()) not in " ".join(proc.cmdline()):
            return  # a recycled pid, not our server
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout)
    except (OSError, ValueError, psutil.Error):
        return


# glibc's allocator in the Lite server (docs/operations.md#supervision): Lite copies its map of deleted
# keys for every request (a dict of hundreds of kilobytes once saves have deleted thousands of
# chunks), in any of its ten gRPC threads. By default each thread may get an allocator arena of
# its own and a freed large block raises the size below which blocks come from those arenas, so
# the copies stayed in them: its memory drifted up 12-16% in a 10-minute soak while its Python
# heap was flat. Two arenas and a fixed 128 KiB threshold (larger blocks are mapped and given
# back when freed) keep it level. An operator's own setting of either wins.
LITE_MALLOC = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "131072"}


class EmbeddedServices:
    """Context manager resolving every component to a usable endpoint."""

    def __init__(
        self,
        settings: Settings,
        components: Iterable[str] = COMPONENTS,
        *,
        require_owner: bool = False,
        owner_wait: float = 120.0,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.home = Home(settings.openkb_home)
        self.components = tuple(components)
        self.require_owner = require_owner
        self.owner_wait = owner_wait
        self.say = say or (lambda msg: log.info(msg))
        self._locks: list[OwnerLock] = []
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        # how each subprocess service was started, so a supervisor can start it again the same way
        # (same port: the API, the worker and Milvus collection functions hold the URL)
        self._launch: dict[str, tuple[list[str], Path, dict[str, str] | None]] = {}
        self._pg: Any = None
        self.endpoints: Endpoints | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> Endpoints:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Endpoints:
        s = self.settings
        s.validate_urls()
        self.home.ensure()
        sources: dict[str, str] = {}
        try:
            pending: dict[str, Callable[[], dict[str, Any]]] = {}
            resolved: dict[str, dict[str, Any]] = {}
            for comp in self.components:
                if not s.embedded(comp):
                    sources[comp] = "external"
                    continue
                rec = None if self.require_owner else read_record(self.home, comp)
                if rec is not None:
                    resolved[comp] = rec
                    sources[comp] = "embedded-shared"
                    continue
                lock = OwnerLock(self.home, comp)
                if self.require_owner:
                    ok = lock.acquire(
                        self.owner_wait,
                        on_wait=lambda r, c=comp: self.say(
                            f"waiting for process {r.get('pid') if r else '?'} to release the embedded {c}"
                        ),
                    )
                    if not ok:
                        raise ServiceUnavailable(f"the embedded {comp} in {self.home.root} is held by another process")
                elif not lock.try_acquire():
                    resolved[comp] = self._wait_record(comp)
                    sources[comp] = "embedded-shared"
                    continue
                self._locks.append(lock)
                sources[comp] = "embedded-own"
                pending[comp] = getattr(self, f"_start_{comp}")
            # Spawn subprocess services first so they boot while PostgreSQL starts in-process.
            waiters: dict[str, Callable[[], dict[str, Any]]] = {}
            for comp in ("embedder", "milvus", "postgresql"):
                if comp in pending:
                    waiters[comp] = pending[comp]()  # type: ignore[assignment]
            for comp, wait in waiters.items():
                try:
                    rec = wait()
                except ServiceUnavailable as exc:
                    if comp != "embedder":
                        raise
                    # No embedding model: search still works, BM25-only (doctor reports it).
                    self.say(f"embedded embedder unavailable, search will be BM25-only: {exc.detail}")
                    stop_process(self._procs.pop("embedder", None))
                    sources[comp] = "unavailable"
                    rec = {"url": None, "unavailable": str(exc.detail)[:300]}
                    write_record(self.home, comp, rec)
                    resolved[comp] = rec
                    continue
                write_record(self.home, comp, rec)
                resolved[comp] = rec
        except BaseException:
            self.stop()
            raise

        self.endpoints = Endpoints(
            database_url=s.database_url or resolved.get("postgresql", {}).get("url", ""),
            milvus_uri=(s.milvus_uri or resolved.get("milvus", {}).get("uri", "")),
            milvus_token=s.milvus_token,
            embedder_url=(s.embedder_url if not s.embedded("embedder") else resolved.get("embedder", {}).get("url")),
            queue=s.redis_url or str(self.home.queue_path),
            home=self.home.root,
            sources=sources,
        )
        return self.endpoints

    def stop(self) -> None:
        for name in ("milvus", "embedder"):
            stop_process(self._procs.pop(name, None))
        if self._pg is not None:
            try:
                self._pg.cleanup()
            except Exception:
                log.exception("stopping embedded PostgreSQL")
            self._pg = None
        elif any(lock.name == "postgresql" for lock in self._locks):
            # Interrupted while pgserver was starting it (a signal during `up`): we own the data
            # directory, so a server running on it is ours to stop.
            stop_postgres_of(self.home.pg_dir)
        for lock in self._locks:
            lock.release()
        self._locks.clear()

    # -- supervision ----------------------------------------------------------------------
    def proc(self, comp: str) -> subprocess.Popen[bytes] | None:
        return self._procs.get(comp)

    def respawn(self, comp: str) -> subprocess.Popen[bytes]:
        """Start Milvus Lite or the embedder again exactly as at start (same port, log, env)."""
        stop_process(self._procs.pop(comp, None), timeout=5)
        cmd, log_path, env = self._launch[comp]
        proc = spawn(cmd, log_path, env)
        self._procs[comp] = proc
        return proc

    @property
    def postgres_pid(self) -> int | None:
        return int(self._pg.get_pid()) if self._pg is not None else None

    def restart_postgresql(self) -> int:
        """Start the embedded PostgreSQL again through pgserver (same data directory and socket, so
        the URL every process holds stays valid); returns the new postmaster's pid.

        pgserver refuses nothing here: ``ensure_postgres_running`` sees ``postmaster.pid`` name a
        dead process and runs ``pg_ctl start``, which replaces the stale file (the dead postmaster
        must have been reaped first: a zombie still "runs" for pgserver and PostgreSQL)."""
        if self._pg is None:
            raise ServiceUnavailable("the embedded PostgreSQL was never started by this process")
        if self._pg.system_user is not None:
            # Run as root, pgserver runs PostgreSQL as its own user and opens the path to the data
            # directory for it only when first started; something may have closed it since (pytest
            # resets its temp root to 0700 whenever another run starts).
            from pgserver.utils import ensure_prefix_permissions

            ensure_prefix_permissions(self._pg.pgdata)
        try:
            with self._pg._lock:
                self._pg.ensure_postgres_running()
        except subprocess.CalledProcessError as exc:
            log_path = self.home.pg_dir / "log"
            tail = log_path.read_text(errors="replace")[-300:].strip() if log_path.exists() else ""
            raise ServiceUnavailable(f"pg_ctl start exited with {exc.returncode}: {tail}") from None
        return int(self._pg.get_pid())

    def _wait_record(self, comp: str, timeout: float = 120.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rec = read_record(self.home, comp)
            if rec is not None:
                return rec
            time.sleep(0.2)
        raise ServiceUnavailable(
            f"the embedded {comp} of {self.home.root} is being started by another process that never finished"
        )

    # -- components -----------------------------------------------------------------------
    def _start_postgresql(self) -> Callable[[], dict[str, Any]]:
        def wait() -> dict[str, Any]:
            import warnings

            warnings.filterwarnings("ignore", module="platformdirs")  # pgserver's XDG_RUNTIME_DIR notice
            logging.getLogger("pgserver").setLevel(logging.WARNING)
            import pgserver

            forget_pgserver_handles(self.home.pg_dir)
            # We hold the postgresql lock, so a server running on the data directory is an orphan
            # of a killed owner whose watchdog did not stop it either: stop it and start our own,
            # which (unlike the orphan) is re-parented to this process and can be watched.
            stop_postgres_of(self.home.pg_dir)
            try:
                self._pg = pgserver.get_server(self.home.pg_dir, cleanup_mode="stop")
            except Exception as exc:  # noqa: BLE001
                raise ServiceUnavailable(
                    f"embedded PostgreSQL failed to start in {self.home.pg_dir}: {exc} (see {self.home.pg_dir}/log)"
                ) from None
            return {"url": self._pg.get_uri(), "version": "16 (pgserver)"}

        return wait

    def _start_milvus(self) -> Callable[[], dict[str, Any]]:
        port = free_port()
        log_path = self.home.log_dir / "milvus.log"
        # Lite's own server, with BM25 scored on the whole collection's statistics
        # (openkb/runtime/lite_bm25.py)
        cmd = lite_command(self.home.milvus_dir, port)
        # Milvus' TEXTEMBEDDING (provider openai) and RERANK (provider cohere) want a key even for
        # the local embedder, which ignores it: without one a rerank profile never reranks.
        env = {
            "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "openkb-local-embedder"),
            "COHERE_API_KEY": os.environ.get("COHERE_API_KEY", "openkb-local-embedder"),
            # how it scores BM25, for doctor and /readyz (openkb/runtime/lite_server.py)
            RECORD_ENV: str(self.home.root),
            **{k: os.environ.get(k, v) for k, v in LITE_MALLOC.items()},
        }
        self._launch["milvus"] = (cmd, log_path, env)
        proc = spawn(cmd, log_path, env)
        self._procs["milvus"] = proc
        uri = f"http://127.0.0.1:{port}"

        def wait() -> dict[str, Any]:
            wait_until(lambda: milvus_ready(uri), 90, "embedded Milvus Lite", proc, log_path)
            return {"uri": uri, "port": port, "child_pid": proc.pid}

        return wait

    def _start_embedder(self) -> Callable[[], dict[str, Any]]:
        port = stable_port(self.home, "embedder")
        if port_in_use(port):
            raise ConfigError(
                f"port {port} (the embedded embedder's port, remembered in {self.home.root}/ports.json) is in use "
                "by another program: stop it, or edit ports.json and rebuild the index"
            )
        log_path = self.home.log_dir / "embedder.log"
        cmd = module_command(
            "openkb.embedder",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--model",
            self.settings.openkb_embedder_model,
        )
        self._launch["embedder"] = (cmd, log_path, None)
        proc = spawn(cmd, log_path)
        self._procs["embedder"] = proc
        base = f"http://127.0.0.1:{port}"

        def wait() -> dict[str, Any]:
            wait_until(lambda: http_ok(base + "/health"), 120, "embedded embedder", proc, log_path)
            return {
                "url": base + "/v1",
                "port": port,
                "child_pid": proc.pid,
                "model": self.settings.openkb_embedder_model,
            }

        return wait
