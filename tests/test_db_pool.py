"""Pooled connections live a bounded time (openkb/db.py ``pool_recycle_seconds``,
``DB_POOL_RECYCLE_SECONDS``): a connection past its lifetime is replaced by a new backend at its
next checkout, and the replacement gets the request bounds again. A connection that sat idle is
tested before it is handed out (``pool_ping_after_idle_seconds``,
``DB_POOL_PING_AFTER_IDLE_SECONDS``); one used a moment ago is not, and if its server went away
meanwhile its statement fails once and the pool starts afresh."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from openkb import db
from openkb.errors import ConfigError

RECYCLE_S = 0.3


@pytest.fixture()
def short_lived_engine(database_url, monkeypatch):
    """An engine of its own (another application_name, so ``get_engine`` builds a new one) whose
    connections live ``RECYCLE_S`` seconds, with one pooled connection so every checkout reuses it."""
    monkeypatch.setenv("DB_POOL_RECYCLE_SECONDS", str(RECYCLE_S))
    url = make_url(db.normalize_url(database_url)).update_query_dict({"application_name": "openkb-recycle-test"})
    key = url.render_as_string(hide_password=False)
    eng = db.get_engine(key, pool_size=1, max_overflow=0)
    try:
        yield eng
    finally:
        db._engines.pop(key, None)
        eng.dispose()


def _own_engine(database_url, name: str, **kw):
    url = make_url(db.normalize_url(database_url)).update_query_dict({"application_name": name})
    key = url.render_as_string(hide_password=False)
    return key, db.get_engine(key, **kw)


@pytest.fixture()
def engines(database_url):
    made = []

    def make(name: str, **kw):
        key, eng = _own_engine(database_url, name, **kw)
        made.append((key, eng))
        return eng

    yield make
    for key, eng in made:
        db._engines.pop(key, None)
        eng.dispose()


def _terminate(database_url, pid: int) -> None:
    _, admin = _own_engine(database_url, "openkb-pool-admin", pool_size=1, max_overflow=0)
    with admin.connect() as conn:
        assert conn.execute(text("SELECT pg_terminate_backend(:p, 5000)"), {"p": pid}).scalar_one()


def test_an_idle_connection_whose_backend_ended_is_tested_and_replaced(database_url, engines, monkeypatch):
    monkeypatch.setenv("DB_POOL_PING_AFTER_IDLE_SECONDS", "0")  # every checkout counts as idle
    eng = engines("openkb-ping-test", pool_size=1, max_overflow=0)
    first = _backend(eng)[0]
    _terminate(database_url, first)
    second = _backend(eng)[0]  # no error: the test found the dead connection, the pool connected anew
    assert second != first


def test_a_connection_used_a_moment_ago_is_not_tested_and_a_failure_resets_the_pool(database_url, engines, monkeypatch):
    from sqlalchemy.exc import OperationalError

    monkeypatch.setenv("DB_POOL_PING_AFTER_IDLE_SECONDS", "3600")
    eng = engines("openkb-noping-test", pool_size=2, max_overflow=0)
    with eng.connect() as a, eng.connect() as b:  # two pooled connections, both used just now
        pids = {
            a.execute(text("SELECT pg_backend_pid()")).scalar_one(),
            b.execute(text("SELECT pg_backend_pid()")).scalar_one(),
        }
    for pid in pids:
        _terminate(database_url, pid)
    with pytest.raises(OperationalError), eng.connect() as conn:  # not tested: its statement fails
        conn.execute(text("SELECT 1"))
    # the disconnect dropped every pooled connection, the other dead one included
    assert _backend(eng)[0] not in pids
    assert _backend(eng)[0] not in pids


def test_the_idle_ping_setting(monkeypatch):
    monkeypatch.delenv("DB_POOL_PING_AFTER_IDLE_SECONDS", raising=False)
    assert db.pool_ping_after_idle_seconds() == 1.0
    monkeypatch.setenv("DB_POOL_PING_AFTER_IDLE_SECONDS", "soon")
    with pytest.raises(ConfigError, match="DB_POOL_PING_AFTER_IDLE_SECONDS"):
        db.pool_ping_after_idle_seconds()


def _backend(eng) -> tuple[int, str]:
    with eng.connect() as conn:
        return conn.execute(text("SELECT pg_backend_pid()")).scalar_one(), conn.execute(
            text("SHOW statement_timeout")
        ).scalar_one()


def test_a_connection_past_its_lifetime_is_replaced_and_keeps_the_request_bounds(short_lived_engine):
    db.bound_requests(short_lived_engine, statement_s=12, idle_in_transaction_s=60)
    first, bound = _backend(short_lived_engine)
    assert _backend(short_lived_engine)[0] == first  # within its lifetime: the same backend
    assert bound == "12s"
    time.sleep(RECYCLE_S + 0.1)  # past the lifetime (not a timing assertion: the order is what counts)
    second, bound = _backend(short_lived_engine)
    assert second != first
    assert bound == "12s"  # the new connection got the bounds on its first checkout
    # the old backend ends (closed, not left idle); it leaves pg_stat_activity as its process exits
    deadline = time.monotonic() + 10
    with short_lived_engine.connect() as conn:
        q = text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p")
        while conn.execute(q, {"p": first}).scalar_one() and time.monotonic() < deadline:
            conn.rollback()  # a new snapshot of the statistics for the next look
            time.sleep(0.05)
        assert conn.execute(q, {"p": first}).scalar_one() == 0


def test_the_lifetime_setting(monkeypatch):
    monkeypatch.delenv("DB_POOL_RECYCLE_SECONDS", raising=False)
    assert db.pool_recycle_seconds() == 300
    monkeypatch.setenv("DB_POOL_RECYCLE_SECONDS", "0")
    assert db.pool_recycle_seconds() == -1  # off: SQLAlchemy's "never"
    monkeypatch.setenv("DB_POOL_RECYCLE_SECONDS", "five minutes")
    with pytest.raises(ConfigError, match="DB_POOL_RECYCLE_SECONDS"):
        db.pool_recycle_seconds()
