"""A private stack for outage tests: its own database, Milvus Lite and embedder processes, and an
API served from this process, so a test may ``kill -9`` Milvus or the embedder without touching
the session's shared ones (other tests and other runs keep theirs).

Only processes started here are ever killed, by the pid ``subprocess`` gave us.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlmodel import Session

import openkb.jobs as jobs
from openkb.jobs import RecordingQueue


class OwnProcess:
    """A child process this test owns: started, killed (SIGKILL) and restarted on the same port."""

    def __init__(self, name: str, cmd: list[str], log: Path, ready: Callable[[], bool], env: dict[str, str]) -> None:
        self.name, self.cmd, self.log, self.ready, self.env = name, cmd, log, ready, env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> None:
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                self.cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env={**os.environ, **self.env}
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log.read_text(errors='replace')[-1500:]}")
            try:
                if self.ready():
                    return
            except Exception:  # noqa: BLE001 - not up yet
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not become ready (log {self.log})")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class Stack:
    base: str
    ctx: Any
    queue: RecordingQueue
    milvus: OwnProcess
    embedder: OwnProcess
    committed: Callable[[], Session]
    world: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def run_jobs(self) -> list[tuple[str, BaseException | None]]:
        """Run what the API enqueued, in order, as the worker would (one unit of work each)."""
        from openkb.db import session_scope
        from workers.tasks import JOBS

        out: list[tuple[str, BaseException | None]] = []
        while self.queue.jobs:
            name, kw = self.queue.jobs.pop(0)
            try:
                with session_scope(self.ctx.engine) as s:
                    JOBS[name](self.ctx, s, **kw)
                out.append((name, None))
            except Exception as exc:  # noqa: BLE001 - the test inspects it
                out.append((name, exc))
        return out


def _new_database(pg_url: str) -> str:
    import psycopg

    from openkb.migrate import upgrade
    from tests.conftest import _with_db

    name = f"openkb_res_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = _with_db(pg_url, name)
    upgrade(url)
    return url


@pytest.fixture(scope="package")
def stack(pg_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    import uvicorn

    from openkb.bootstrap import ensure_instance
    from openkb.config import Settings
    from openkb.context import AppContext
    from openkb.db import session_scope
    from openkb.indexing.service import ensure_default_profile
    from openkb.runtime.embedded import Endpoints, free_port, http_ok, milvus_ready
    from openkb.runtime.lite_server import lite_command
    from server.app import create_app

    home = tmp_path_factory.mktemp("resilience")
    settings = Settings()
    db_url = _new_database(pg_server)
    mport, eport = free_port(), free_port()
    milvus_uri = f"http://127.0.0.1:{mport}"
    milvus = OwnProcess(
        "milvus",
        lite_command(home / "milvus", mport),
        home / "milvus.log",
        lambda: milvus_ready(milvus_uri),
        {"OPENAI_API_KEY": "openkb-local-embedder", "COHERE_API_KEY": "openkb-local-embedder"},
    )
    embed_base = f"http://127.0.0.1:{eport}"
    embedder = OwnProcess(
        "embedder",
        [sys.executable, "-m", "openkb.embedder", "--host", "127.0.0.1", "--port", str(eport)]
        + ["--model", settings.openkb_embedder_model],
        home / "embedder.log",
        lambda: http_ok(embed_base + "/health"),
        {},
    )
    embedder.start()
    milvus.start()
    ctx = AppContext.build(
        settings,
        Endpoints(
            database_url=db_url,
            milvus_uri=milvus_uri,
            milvus_token=None,
            embedder_url=embed_base + "/v1",
            queue=str(home / "queue.db"),
            home=home,
        ),
    )
    with session_scope(ctx.engine) as s:
        ensure_instance(s)
    with session_scope(ctx.engine) as s:
        prof = ensure_default_profile(ctx, s)
        assert prof is not None and prof.vector_dim, "the private stack must search hybrid (dense + BM25)"

    previous = jobs._queue
    queue = RecordingQueue()
    app = create_app(ctx, queue=queue)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on")
    )
    thread = threading.Thread(target=server.run, name="uvicorn-resilience", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/readyz", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    else:
        raise RuntimeError("the resilience test server did not become ready")

    def committed() -> Session:
        return Session(ctx.engine, expire_on_commit=False)

    st = Stack(base=base, ctx=ctx, queue=queue, milvus=milvus, embedder=embedder, committed=committed)
    from tests.content.http_world import HttpWorld

    st.world = HttpWorld(base, committed)
    try:
        yield st
    finally:
        st.world.close()
        server.should_exit = True
        thread.join(15)
        jobs.set_queue(previous)
        ctx.close()
        milvus.kill()
        embedder.kill()
        ctx.engine.dispose()
