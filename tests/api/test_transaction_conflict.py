"""A write PostgreSQL rolls back to break a deadlock is TRANSACTION_CONFLICT, not "unreachable",
and the server runs it again (server/retry.py, docs/api.md#status-codes)."""

from __future__ import annotations

import threading
import uuid

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from sqlalchemy import text

from openkb.db import session_scope
from openkb.errors import DatabaseUnavailable, TransactionConflict
from server import errors
from server.retry import RETRYABLE_HEADER, RetryOnConflict


def test_a_real_deadlock_is_a_transaction_conflict(engine):
    """Two units of work lock two rows in opposite orders: PostgreSQL rolls one back (40P01)."""
    table = f"deadlock_{uuid.uuid4().hex[:8]}"
    with engine.begin() as c:
        c.execute(text(f"CREATE TABLE {table} (id int PRIMARY KEY, n int)"))
        c.execute(text(f"INSERT INTO {table} VALUES (1, 0), (2, 0)"))
    both_locked = threading.Barrier(2)
    outcome: dict[str, BaseException | None] = {}

    def writer(name: str, first: int, second: int) -> None:
        try:
            with session_scope(engine) as s:
                s.execute(text(f"UPDATE {table} SET n = n + 1 WHERE id = :i"), {"i": first})
                both_locked.wait(timeout=10)
                s.execute(text(f"UPDATE {table} SET n = n + 1 WHERE id = :i"), {"i": second})
            outcome[name] = None
        except BaseException as exc:  # noqa: BLE001 - the test reads it below
            outcome[name] = exc

    threads = [threading.Thread(target=writer, args=("a", 1, 2)), threading.Thread(target=writer, args=("b", 2, 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    try:
        failed = [e for e in outcome.values() if e is not None]
        assert len(outcome) == 2 and len(failed) == 1, outcome
        assert isinstance(failed[0], TransactionConflict) and not isinstance(failed[0], DatabaseUnavailable)
        assert failed[0].code == "TRANSACTION_CONFLICT" and "nothing was written" in failed[0].detail
    finally:
        with engine.begin() as c:
            c.execute(text(f"DROP TABLE {table}"))


@pytest.fixture()
def app_with(request):
    """A tiny app with OpenKB's error handlers and the retry middleware; ``fail`` conflicts first."""
    calls: list[bytes] = []
    fail_times = request.param

    app = FastAPI()
    errors.install(app)
    app.add_middleware(RetryOnConflict)

    @app.post("/write")
    async def write(req: Request) -> dict:
        calls.append(await req.body())
        if len(calls) <= fail_times:
            raise TransactionConflict("a concurrent change got in the way; nothing was written", retry_after=1)
        return {"ok": True, "attempt": len(calls)}

    return TestClient(app), calls


@pytest.mark.parametrize("app_with", [2], indirect=True)
def test_the_write_is_run_again_with_its_body(app_with):
    client, calls = app_with
    r = client.post("/write", json={"title": "Kept"})
    assert r.status_code == 200 and r.json() == {"ok": True, "attempt": 3}
    assert calls == [b'{"title":"Kept"}'] * 3  # the same body each time
    assert RETRYABLE_HEADER not in r.headers


@pytest.mark.parametrize("app_with", [99], indirect=True)
def test_after_the_last_attempt_the_client_hears_503_with_retry_after(app_with):
    client, calls = app_with
    r = client.post("/write", json={})
    assert r.status_code == 503 and r.json()["error"] == "TRANSACTION_CONFLICT"
    assert r.headers["retry-after"] == "1" and RETRYABLE_HEADER not in r.headers
    assert len(calls) == 3


@pytest.mark.parametrize("app_with", [99], indirect=True)
def test_uploads_are_not_replayed(app_with):
    client, calls = app_with
    r = client.post("/write", files={"file": ("a.txt", b"hi", "text/plain")})
    assert r.status_code == 503 and len(calls) == 1 and RETRYABLE_HEADER not in r.headers
