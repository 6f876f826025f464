"""A private PostgreSQL in a temporary directory, for tests that crash, stop or restart it.

Only this server's own processes are ever signalled: the postmaster named by its
``postmaster.pid`` (checked to run on this data directory) and that postmaster's children. Other
test runs on the machine own their servers; nothing is ever signalled by name.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse


@dataclass
class PrivatePostgres:
    uri: str
    data: Path
    socket_dir: str
    user: Any

    def pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])

    def processes(self) -> list[Any]:
        """The postmaster of this data directory and its backends (a recycled pid is refused)."""
        import psutil

        master = psutil.Process(self.pid())
        assert str(self.data.resolve()) in " ".join(master.cmdline()), "postmaster.pid names another process"
        return [master, *master.children(recursive=True)]

    def crash(self) -> None:
        """kill -9 of the postmaster and of its backends, like a crash of the machine's database:
        a backend outlives a killed postmaster until it next checks."""
        import psutil

        procs = self.processes()
        for p in procs:
            os.kill(p.pid, signal.SIGKILL)
        psutil.wait_procs(procs, timeout=30)

    @contextlib.contextmanager
    def stopped(self) -> Iterator[None]:
        """SIGSTOP the server (postmaster and backends) for the block: hung, not dead; SIGCONT
        after it, whatever happens inside."""
        procs = self.processes()
        stopped = []
        try:
            for p in procs:
                os.kill(p.pid, signal.SIGSTOP)
                stopped.append(p)
            yield
        finally:
            for p in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGCONT)

    def start(self) -> None:  # as pgserver starts it
        from pgserver._commands import pg_ctl

        args = ["-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.data / "restart.log"), "start"]
        pg_ctl(args, pgdata=self.data, user=self.user, timeout=120)

    def stop(self, mode: str = "fast") -> None:
        from pgserver._commands import pg_ctl

        try:
            pg_ctl(["-m", mode, "stop"], pgdata=self.data, user=self.user, timeout=60)
        except Exception:  # noqa: BLE001 - already stopped
            pass


@contextlib.contextmanager
def private_postgres(prefix: str = "openkb-res-pg-") -> Iterator[PrivatePostgres]:
    import pgserver

    logging.getLogger("pgserver").setLevel(logging.WARNING)  # as openkb.runtime does
    data = Path(tempfile.mkdtemp(prefix=prefix))
    srv = pgserver.get_server(data, cleanup_mode=None)
    uri = srv.get_uri()
    pg = PrivatePostgres(uri, data, parse_qs(urlparse(uri).query)["host"][0], srv.system_user)
    try:
        yield pg
    finally:
        with contextlib.suppress(Exception):  # never leave it stopped: a stopped server cannot stop
            for p in pg.processes():
                os.kill(p.pid, signal.SIGCONT)
        pg.stop("immediate")
        shutil.rmtree(data, ignore_errors=True)


def app_on(pg: PrivatePostgres, **settings: Any) -> tuple[Any, str]:
    """An AppContext on a fresh database of ``pg`` and a PAT of a new user (read+write scopes)."""
    from openkb.bootstrap import ensure_instance
    from openkb.config import Settings
    from openkb.context import AppContext
    from openkb.db import session_scope
    from openkb.runtime.embedded import Endpoints
    from tests.api.helpers import make_user_with_pat
    from tests.resilience.conftest import _new_database

    url = _new_database(pg.uri)
    ctx = AppContext.build(
        Settings(**settings),
        Endpoints(
            database_url=url,
            milvus_uri="http://127.0.0.1:9",  # not used by these routes
            milvus_token=None,
            embedder_url=None,
            queue="/nonexistent",
            home=pg.data,
        ),
    )
    with session_scope(ctx.engine) as s:
        ensure_instance(s)

    def committed():  # type: ignore[no-untyped-def]
        from sqlmodel import Session

        return Session(ctx.engine, expire_on_commit=False)

    _, token = make_user_with_pat(committed, scopes=("kb:read", "kb:write", "doc:read", "doc:write"))
    return ctx, token
