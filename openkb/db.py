"""Engine and unit-of-work helpers.

Services receive a ``Session`` and never commit; the adapter that opened the session owns the
transaction (request dependency, CLI context, task wrapper) and runs ``after_commit`` hooks —
that is how jobs get enqueued only once their rows are visible to the worker.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlmodel import Session, create_engine

from openkb.errors import ConfigError, ServiceUnavailable

log = logging.getLogger("openkb.db")

_engines: dict[str, Engine] = {}


def normalize_url(url: str) -> str:
    """Accept ``postgres://``/``postgresql://`` and pin the psycopg 3 driver."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
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


@contextlib.contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One unit of work: commit on success, rollback on any exception."""
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except OperationalError as exc:
        session.rollback()
        raise ServiceUnavailable(f"PostgreSQL is unreachable: {exc.orig}") from None
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
