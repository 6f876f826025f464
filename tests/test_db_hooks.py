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

    import openkb.jobs
    from openkb.jobs import RecordingQueue, enqueue_after_commit, set_queue

    previous = openkb.jobs._queue  # the live server's queue: later HTTP tests need it back
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
        set_queue(previous)


class _Refused(Exception):
    pass


def _audit_count(engine, action: str) -> int:
    with session_scope(engine) as s:
        return s.execute(text("SELECT count(*) FROM audit_logs WHERE action = :a"), {"a": action}).scalar_one()


def test_record_then_refuse_keeps_the_record_through_the_rollback(engine):
    """The refusal rolls the unit of work back; the record, committed apart, stays."""
    import uuid

    from openkb.audit import record_audit, set_origin
    from openkb.db import record_then_refuse

    kept, lost = f"test.kept.{uuid.uuid4().hex[:8]}", f"test.lost.{uuid.uuid4().hex[:8]}"
    with pytest.raises(_Refused), session_scope(engine) as s:
        set_origin(s, ip="10.1.2.3", via="test")
        record_audit(s, tenant_id=None, actor=None, action=lost, object_type=None, object_id=None)
        record_then_refuse(
            s,
            lambda apart: record_audit(
                apart, tenant_id=None, actor=None, action=kept, object_type=None, object_id=None
            ),
            _Refused(),
        )
    assert _audit_count(engine, kept) == 1 and _audit_count(engine, lost) == 0
    with session_scope(engine) as s:  # the separate transaction carried the session's audit origin
        ip, via = s.execute(text("SELECT ip, metadata->>'via' FROM audit_logs WHERE action = :a"), {"a": kept}).one()
    assert (ip, via) == ("10.1.2.3", "test")


def test_commit_apart_runs_no_hooks_of_the_callers_transaction(engine):
    from openkb.db import commit_apart

    ran: list[str] = []
    with session_scope(engine) as s:
        after_commit(s, lambda: ran.append("caller"))
        assert commit_apart(s, lambda apart: apart.execute(text("SELECT 41 + 1")).scalar_one()) == 42
        assert ran == []  # committing apart is not the caller's commit
    assert ran == ["caller"]


def test_commit_apart_on_a_connection_bound_session_writes_into_it(db):
    """Tests' rolled-back ``db`` session owns no transaction of its own: the write goes into it."""
    import uuid

    from openkb.audit import record_audit
    from openkb.db import commit_apart

    action = f"test.inline.{uuid.uuid4().hex[:8]}"
    commit_apart(
        db, lambda s: record_audit(s, tenant_id=None, actor=None, action=action, object_type=None, object_id=None)
    )
    assert db.execute(text("SELECT count(*) FROM audit_logs WHERE action = :a"), {"a": action}).scalar_one() == 1


def test_an_interrupt_in_an_after_commit_hook_is_what_the_unit_of_work_raises(engine):
    """Ctrl-C landing in an after-commit hook (a slow first import inside ``commit()``): the
    rollback that follows fails ("commit in progress"); the caller must still see the
    KeyboardInterrupt, or a per-file ``except Exception`` swallows the interrupt."""

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), session_scope(engine) as s:
        s.execute(text("SELECT 1"))
        after_commit(s, interrupted)
    with session_scope(engine) as s:  # the engine's connections are still usable
        assert s.execute(text("SELECT 1")).scalar_one() == 1
