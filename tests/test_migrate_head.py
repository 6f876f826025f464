"""``openkb.migrate.upgrade_if_behind``: the schema check every CLI command runs first.

A database at ``HEAD`` is answered by one query, without Alembic; a new one is migrated; and
``HEAD`` must name the newest migration shipped, or a database left one behind would be taken
for current (real PostgreSQL).
"""

from __future__ import annotations

import uuid

import psycopg
import pytest

from openkb import migrate


def test_head_is_the_newest_migration():
    assert migrate.HEAD == migrate.head_revision()


def test_a_database_at_head_is_not_migrated_again(database_url, monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("Alembic ran for a database at head")

    monkeypatch.setattr(migrate, "upgrade", refuse)
    assert migrate.upgrade_if_behind(database_url) is False


def test_a_new_database_is_migrated_to_head(pg_server):
    from tests.conftest import _with_db

    name = f"openkb_test_new_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        url = _with_db(pg_server, name)
        assert migrate.upgrade_if_behind(url) is True
        assert migrate.current_revision(url) == migrate.HEAD
        assert migrate.upgrade_if_behind(url) is False
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_an_unreachable_database_is_a_clear_error():
    from openkb.errors import ServiceUnavailable

    with pytest.raises(ServiceUnavailable, match="PostgreSQL is unreachable"):
        migrate.upgrade_if_behind("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
