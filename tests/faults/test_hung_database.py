"""A hung (not dead) PostgreSQL (issue 17, docs/operations.md#outages): the server is SIGSTOPped
while the API holds pooled connections to it. A request must not wait for as long as the server
stays stopped: the client-side hang watch (openkb/runtime/dbhang.py) probes the server, finds it
silent and cuts the exchange, and the request gets 503 ``DATABASE_UNAVAILABLE`` with
``Retry-After``. Once the server is continued (SIGCONT), the next request is served by the same
app.

Only the test's own private PostgreSQL is stopped (its postmaster by its ``postmaster.pid``,
checked to run on the test's data directory, and that postmaster's children).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.resilience.private_pg import PrivatePostgres, app_on, private_postgres

pytestmark = [pytest.mark.faults]

HANG = 120.0  # a request still running after this long is a hang (the bound is seconds)


@pytest.fixture(scope="module")
def private_pg() -> Iterator[PrivatePostgres]:
    with private_postgres(prefix="openkb-hung-pg-") as pg:
        yield pg


def _request(c: Any, method: str, path: str, **kw: Any) -> tuple[Any, float]:
    """The request in a thread, so that a hang fails the test instead of blocking it."""
    out: dict[str, Any] = {}

    def go() -> None:
        t = time.monotonic()
        try:
            out["r"] = c.request(method, path, **kw)
        except BaseException as exc:  # noqa: BLE001 - reported below
            out["exc"] = exc
        out["s"] = time.monotonic() - t

    th = threading.Thread(target=go, daemon=True)
    th.start()
    th.join(HANG)
    assert not th.is_alive(), f"{method} {path} hung on a stopped PostgreSQL"
    if "exc" in out:
        raise out["exc"]
    return out["r"], out["s"]


def test_a_stopped_postgresql_gives_503_not_a_hang_and_the_app_recovers(private_pg):
    from fastapi.testclient import TestClient

    import openkb.jobs as jobs
    from openkb.jobs import RecordingQueue
    from openkb.runtime.dbhang import WATCH
    from server.app import create_app

    previous = jobs._queue
    ctx, token = app_on(private_pg)
    try:
        app = create_app(ctx, queue=RecordingQueue(), warm=False)
        headers = {"Authorization": f"Bearer {token}"}
        with TestClient(app, raise_server_exceptions=False) as c:
            assert c.get("/api/me", headers=headers).status_code == 200  # a pooled connection exists
            cuts = WATCH.cuts
            with private_pg.stopped():
                r, read_s = _request(c, "GET", "/api/me", headers=headers)
                assert r.status_code == 503, r.text
                assert r.json()["error"] == "DATABASE_UNAVAILABLE"
                assert int(r.headers["retry-after"]) >= 1
                w, write_s = _request(c, "POST", "/api/workspaces", json={"name": "while hung"}, headers=headers)
                assert w.status_code == 503 and w.json()["error"] == "DATABASE_UNAVAILABLE", w.text
            assert WATCH.cuts > cuts  # the watch cut the stuck exchange (not a server-side error)
            print(f"\nhung PostgreSQL: read answered 503 in {read_s:.1f}s, write in {write_s:.1f}s")
            r = c.get("/api/me", headers=headers)  # continued: the same app serves again
            assert r.status_code == 200, r.text
            r = c.post("/api/workspaces", json={"name": "after the stop"}, headers=headers)
            assert r.status_code == 201, r.text
    finally:
        jobs.set_queue(previous)
        ctx.engine.dispose()
