"""Pooled connections live a bounded time (openkb/db.py ``pool_recycle_seconds``,
``DB_POOL_RECYCLE_SECONDS``): a connection past its lifetime is replaced by a new backend at its
next checkout, and the replacement gets the request bounds again."""

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
