"""Engine and unit-of-work helpers.

Services receive a ``Session`` and never commit; the adapter that opened the session owns the
transaction (request dependency, CLI context, task wrapper) and runs ``after_commit`` hooks —
that is how jobs get enqueued only once their rows are visible to the worker.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlmodel import Session, create_engine

from openkb.errors import ConfigError, DatabaseUnavailable, TransactionConflict

log = logging.getLogger("openkb.db")

T = TypeVar("T")

_engines: dict[str, Engine] = {}


def normalize_url(url: str) -> str:
    """Accept ``postgres://``/``postgresql://`` and pin the psycopg 3 driver."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def get_engine(url: str, **kw: Any) -> Engine:
    url = normalize_url(url)
    eng = _engines.get(url)
    if eng is None:
        try:
            make_url(url)
        except ArgumentError as exc:
            raise ConfigError(f"DATABASE_URL is malformed: {exc}") from None
        eng = create_engine(
            url,
            pool_pre_ping=True,
            pool_size=kw.pop("pool_size", 10),
            max_overflow=kw.pop("max_overflow", 20),
            connect_args={"connect_timeout": 5, **kw.pop("connect_args", {})},
            **kw,
        )
        _engines[url] = eng
    return eng


def dispose_engines() -> None:
    for eng in _engines.values():
        eng.dispose()
    _engines.clear()


def after_commit(session: Session, fn: Callable[[], Any]) -> None:
    """Run ``fn`` once the current transaction commits; dropped on rollback."""
    hooks: list[Callable[[], Any]] = session.info.setdefault("after_commit", [])
    hooks.append(fn)


def after_rollback(session: Session, fn: Callable[[], Any]) -> None:
    """Run ``fn`` if the current transaction rolls back (undo side effects outside PostgreSQL,
    such as a blob already written); dropped on commit."""
    hooks: list[Callable[[], Any]] = session.info.setdefault("after_rollback", [])
    hooks.append(fn)


# Trap: SQLAlchemy fires after_commit / after_rollback for savepoints (``begin_nested``) too.
# Releasing or rolling back a savepoint must neither run nor drop the transaction's hooks.


@event.listens_for(Session, "after_commit")
def _run_after_commit(session: Session) -> None:
    if session.in_nested_transaction():
        return
    session.info.pop("after_rollback", None)
    hooks = session.info.pop("after_commit", [])
    for fn in hooks:
        fn()


@event.listens_for(Session, "after_rollback")
def _drop_after_commit(session: Session) -> None:
    if session.in_nested_transaction():
        return
    session.info.pop("after_commit", None)


@event.listens_for(Session, "after_transaction_end")
def _run_after_rollback(session: Session, transaction: Any) -> None:
    # The outermost transaction ended; hooks still here mean it did not commit (rolled back, or
    # closed without commit). Savepoints (``transaction.parent`` set) never trigger them.
    if transaction.parent is not None:
        return
    for fn in session.info.pop("after_rollback", []):
        try:
            fn()
        except Exception:  # noqa: BLE001 - the rollback stands; a failed clean-up must not mask its cause
            log.exception("after-rollback hook failed")


# Session.info keys that belong to one transaction, never copied to another session.
_HOOK_KEYS = ("after_commit", "after_rollback")


def commit_apart(session: Session, write: Callable[[Session], T]) -> T:
    """Run ``write`` in a transaction of its own on ``session``'s database and commit it now,
    whatever later becomes of ``session``'s unit of work; returns what ``write`` returned.

    For records that must outlive a refusal: a failed login's throttle count, a wrong share-link
    password, a rejected key. ``session.info`` (the audit origin) is carried over.

    Traps: the separate transaction does not see ``session``'s uncommitted rows, so ``write``
    may only refer to rows committed before (the tenant, the link, the key); and it must not
    touch a row ``session`` has locked (``FOR UPDATE``, a rate-limit bucket it already hit), or
    the two wait on each other for ever. Append-only tables (``audit_logs``) and counters the
    caller only peeked at are safe.

    A session bound to a ``Connection`` (someone else owns the outer transaction, as the tests'
    rolled-back ``db`` fixture does) has no independent transaction to write to: ``write`` then
    runs in ``session`` itself and the connection's owner decides.
    """
    bind = session.get_bind()
    if isinstance(bind, Connection):
        out = write(session)
        session.flush()
        return out
    with Session(bind, expire_on_commit=False) as apart:
        apart.info.update({k: v for k, v in session.info.items() if k not in _HOOK_KEYS})
        try:
            out = write(apart)
            apart.commit()
        except OperationalError as exc:
            apart.rollback()
            raise database_error(exc) from None
        return out


def database_error(exc: OperationalError) -> DatabaseUnavailable | TransactionConflict:
    """What an ``OperationalError`` means for the caller. Trap: psycopg's deadlock and
    serialization failures are ``OperationalError`` too; they are a concurrent write getting in
    the way (retry at once), not PostgreSQL being unreachable (retry in a few seconds)."""
    if (getattr(exc.orig, "sqlstate", None) or "").startswith("40"):  # class 40: transaction rollback
        first = str(exc.orig).splitlines()[0] if exc.orig else "conflict"
        return TransactionConflict(f"a concurrent change got in the way ({first}); nothing was written", retry_after=1)
    return DatabaseUnavailable(f"PostgreSQL is unreachable: {exc.orig}", retry_after=5)


def record_then_refuse(session: Session, record: Callable[[Session], Any], error: BaseException) -> NoReturn:
    """Commit ``record``'s rows apart (see ``commit_apart``), then raise ``error``.

    The one way to refuse a request while keeping the record of the refusal: raising rolls the
    caller's unit of work back, so a failure written there (an audit row, a failure counter)
    would vanish with it and brute force would be free. Services call this instead of returning
    a status for the adapter to commit before raising: adapters never commit mid-request.
    """
    commit_apart(session, record)
    raise error


@contextlib.contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One unit of work: commit on success, rollback on any exception."""
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except OperationalError as exc:
        session.rollback()
        raise database_error(exc) from None
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
