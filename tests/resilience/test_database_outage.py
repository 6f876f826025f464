"""The API survives a restart of PostgreSQL without being restarted itself (issue 17): while the
database is down requests get 503 ``DATABASE_UNAVAILABLE`` with ``Retry-After`` (no 500, no hang,
no traceback); once it is back the pooled connections are replaced (openkb/db.py ``_ping_idle_connections``) and the
same app answers again. Request work is bounded by PostgreSQL itself too (``statement_timeout``,
``idle_in_transaction_session_timeout``; openkb/db.py ``bound_requests``), except where a route
lifts the bounds for a long operation (an export stream).

The database here is a private PostgreSQL in a temporary directory (tests/resilience/private_pg.py),
killed by the pid its own ``postmaster.pid`` names; the session's shared server is never touched.
A hung (SIGSTOPped) server is tests/faults/test_hung_database.py.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import text

from tests.resilience.private_pg import PrivatePostgres, app_on, private_postgres


@pytest.fixture(scope="module")
def private_pg() -> Iterator[PrivatePostgres]:
    with private_postgres() as pg:
        yield pg


def test_postgres_restart_503_then_the_same_app_answers(private_pg, caplog):
    from fastapi.testclient import TestClient

    import openkb.jobs as jobs
    from openkb.jobs import RecordingQueue
    from server.app import create_app

    previous = jobs._queue
    ctx, token = app_on(private_pg)
    try:
        app = create_app(ctx, queue=RecordingQueue(), warm=False)
        headers = {"Authorization": f"Bearer {token}"}
        with TestClient(app, raise_server_exceptions=False) as c:
            assert c.get("/api/me", headers=headers).status_code == 200
            private_pg.crash()
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
            private_pg.start()
            r = c.get("/api/me", headers=headers)  # the same app, its pool refreshed
            assert r.status_code == 200, r.text
            r = c.post("/api/workspaces", json={"name": f"ws {uuid.uuid4().hex[:6]}"}, headers=headers)
            assert r.status_code == 201, r.text
    finally:
        jobs.set_queue(previous)
        ctx.engine.dispose()


def test_request_work_is_bounded_by_postgresql_and_a_long_operation_lifts_the_bound(private_pg):
    """A request stuck behind a lock gets 503 DATABASE_UNAVAILABLE once its statement passes
    ``statement_timeout``, instead of holding its thread for as long as the lock is held; the
    export stream's transaction lifts the bounds (SET LOCAL) and the next transaction on the same
    pooled connection has them again."""
    from fastapi.testclient import TestClient

    import openkb.jobs as jobs
    from openkb.db import bound_requests, lift_request_bounds, session_scope
    from openkb.jobs import RecordingQueue
    from server.app import create_app

    previous = jobs._queue
    ctx, token = app_on(private_pg)
    try:
        app = create_app(ctx, queue=RecordingQueue(), warm=False)
        bound_requests(ctx.engine, statement_s=0.3, idle_in_transaction_s=60)  # what create_app set, shorter
        headers = {"Authorization": f"Bearer {token}"}
        plain = ctx.engine.url.render_as_string(hide_password=False).replace("+psycopg", "")
        with TestClient(app, raise_server_exceptions=False) as c, psycopg.connect(plain) as holder:
            assert c.get("/api/me", headers=headers).status_code == 200
            # held until the rollback below (or 20 s: without the bound the request would then pass)
            holder.execute("SET idle_in_transaction_session_timeout = '20s'")
            holder.execute("LOCK TABLE workspaces IN ACCESS EXCLUSIVE MODE")
            r = c.post("/api/workspaces", json={"name": "behind a lock"}, headers=headers)
            assert r.status_code == 503, r.text
            assert r.json()["error"] == "DATABASE_UNAVAILABLE" and "time limit" in r.json()["detail"]
            assert int(r.headers["retry-after"]) >= 1
            holder.rollback()
            r = c.post("/api/workspaces", json={"name": "after the lock"}, headers=headers)
            assert r.status_code == 201, r.text

        with session_scope(ctx.engine) as s:
            assert s.execute(text("SHOW statement_timeout")).scalar() == "300ms"
            assert s.execute(text("SHOW idle_in_transaction_session_timeout")).scalar() == "1min"
            lift_request_bounds(s)
            assert s.execute(text("SHOW statement_timeout")).scalar() == "0"
            s.execute(text("SELECT pg_sleep(0.5)"))  # longer than the request bound: not cancelled
        with session_scope(ctx.engine) as s:
            assert s.execute(text("SHOW statement_timeout")).scalar() == "300ms"
    finally:
        jobs.set_queue(previous)
        ctx.engine.dispose()
