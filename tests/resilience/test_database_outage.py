"""The API survives a restart of PostgreSQL without being restarted itself (issue 17): while the
database is down requests get 503 ``DATABASE_UNAVAILABLE`` with ``Retry-After`` (no 500, no hang,
no traceback); once it is back the pooled connections are replaced (``pool_pre_ping``) and the
same app answers again.

The database here is a private PostgreSQL in a temporary directory, killed by the pid its own
``postmaster.pid`` names; the session's shared server is never touched.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest


@pytest.fixture(scope="module")
def private_pg() -> Iterator[dict]:
    import pgserver
    from pgserver._commands import pg_ctl

    logging.getLogger("pgserver").setLevel(logging.WARNING)  # as openkb.runtime does
    data = Path(tempfile.mkdtemp(prefix="openkb-res-pg-"))
    srv = pgserver.get_server(data, cleanup_mode=None)
    uri = srv.get_uri()
    socket_dir = parse_qs(urlparse(uri).query)["host"][0]
    user = srv.system_user  # pgserver runs PostgreSQL as its own user when we are root

    def pid() -> int:
        return int((data / "postmaster.pid").read_text().split("\n", 1)[0])

    def crash() -> None:
        """kill -9 of our own postmaster (by its pid file) and of its backends, like a crash of
        the machine's database: a backend outlives a killed postmaster until it next checks."""
        import psutil

        master = psutil.Process(pid())
        procs = [master, *master.children(recursive=True)]
        for p in procs:
            os.kill(p.pid, signal.SIGKILL)
        psutil.wait_procs(procs, timeout=30)

    def start() -> None:  # as pgserver starts it
        args = ["-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(data / "restart.log"), "start"]
        pg_ctl(args, pgdata=data, user=user, timeout=120)

    def stop(mode: str = "fast") -> None:
        try:
            pg_ctl(["-m", mode, "stop"], pgdata=data, user=user, timeout=60)
        except Exception:  # noqa: BLE001 - already stopped
            pass

    try:
        yield {"uri": uri, "pid": pid, "crash": crash, "start": start, "stop": stop, "data": data}
    finally:
        stop("immediate")
        shutil.rmtree(data, ignore_errors=True)


def test_postgres_restart_503_then_the_same_app_answers(private_pg, caplog):
    from fastapi.testclient import TestClient

    from openkb.bootstrap import ensure_instance
    from openkb.config import Settings
    from openkb.context import AppContext
    from openkb.db import session_scope
    from openkb.jobs import RecordingQueue
    from openkb.runtime.embedded import Endpoints
    from server.app import create_app
    from tests.api.helpers import make_user_with_pat
    from tests.resilience.conftest import _new_database

    url = _new_database(private_pg["uri"])
    ctx = AppContext.build(
        Settings(),
        Endpoints(
            database_url=url,
            milvus_uri="http://127.0.0.1:9",  # not used by these routes
            milvus_token=None,
            embedder_url=None,
            queue="/nonexistent",
            home=private_pg["data"],
        ),
    )
    import openkb.jobs as jobs

    previous = jobs._queue
    try:
        with session_scope(ctx.engine) as s:
            ensure_instance(s)

        def committed():
            from sqlmodel import Session

            return Session(ctx.engine, expire_on_commit=False)

        _, token = make_user_with_pat(committed, scopes=("kb:read", "kb:write", "doc:read", "doc:write"))
        app = create_app(ctx, queue=RecordingQueue(), warm=False)
        headers = {"Authorization": f"Bearer {token}"}
        with TestClient(app, raise_server_exceptions=False) as c:
            assert c.get("/api/me", headers=headers).status_code == 200
            private_pg["crash"]()
            caplog.clear()
            caplog.set_level(logging.WARNING)
            for _ in range(5):
                r = c.get("/api/me", headers=headers)
                assert r.status_code == 503, r.text
                assert r.json()["error"] == "DATABASE_UNAVAILABLE"
                assert int(r.headers["retry-after"]) >= 1
            r = c.post("/api/workspaces", json={"name": f"ws {uuid.uuid4().hex[:6]}"}, headers=headers)  # a write too
            assert r.status_code == 503 and r.json()["error"] == "DATABASE_UNAVAILABLE"
            assert not [x for x in caplog.records if x.exc_info or "Traceback" in x.getMessage()]
            private_pg["start"]()
            r = c.get("/api/me", headers=headers)  # the same app, its pool refreshed
            assert r.status_code == 200, r.text
            r = c.post("/api/workspaces", json={"name": f"ws {uuid.uuid4().hex[:6]}"}, headers=headers)
            assert r.status_code == 201, r.text
    finally:
        jobs.set_queue(previous)
        ctx.engine.dispose()
