"""after_commit / after_rollback hooks belong to the outermost transaction, not to savepoints."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from openkb.db import after_commit, after_rollback, session_scope


def test_savepoints_neither_run_nor_drop_hooks(engine):
    ran: list[str] = []
    with session_scope(engine) as s:
        after_commit(s, lambda: ran.append("commit"))
        after_rollback(s, lambda: ran.append("rollback"))
        with s.begin_nested():  # released
            s.execute(text("SELECT 1"))
        with pytest.raises(DBAPIError), s.begin_nested():  # rolled back
            s.execute(text("SELECT 1 / 0"))
        assert ran == []
    assert ran == ["commit"]


def test_rollback_runs_rollback_hooks_only(engine):
    ran: list[str] = []
    with pytest.raises(RuntimeError), session_scope(engine) as s:
        after_commit(s, lambda: ran.append("commit"))
        after_rollback(s, lambda: ran.append("rollback"))
        s.execute(text("SELECT 1"))
        raise RuntimeError("the unit of work fails")
    assert ran == ["rollback"]
    with session_scope(engine) as s:  # a hook fires once, for its own transaction only
        s.execute(text("SELECT 1"))
    assert ran == ["rollback"]


def test_jobs_of_a_rolled_back_transaction_are_forgotten(engine):
    """A session reused after a rollback queues the jobs of its next transaction, and only those."""
    from sqlmodel import Session

    from openkb.jobs import RecordingQueue, enqueue_after_commit, set_queue

    q = RecordingQueue()
    set_queue(q)
    try:
        with Session(engine) as s:
            s.execute(text("SELECT 1"))  # the write the job is about
            enqueue_after_commit(s, "index_document", document_id="a")
            s.rollback()
            s.execute(text("SELECT 1"))
            enqueue_after_commit(s, "index_document", document_id="b")
            enqueue_after_commit(s, "index_document", document_id="a")  # not a duplicate any more
            s.commit()
        assert q.jobs == [("index_document", {"document_id": "b"}), ("index_document", {"document_id": "a"})]
    finally:
        set_queue(None)
