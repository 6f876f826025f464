"""Engine and unit-of-work helpers.

Services receive a ``Session`` and never commit; the adapter that opened the session owns the
transaction (request dependency, CLI context, task wrapper) and runs ``after_commit`` hooks —
that is how jobs get enqueued only once their rows are visible to the worker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

from sqlalchemy import event, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError, OperationalError
from sqlmodel import Session, create_engine

from openkb.errors import ConfigError, DatabaseUnavailable, TransactionConflict
from openkb.runtime.dbhang import GuardedConnection

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
            pool_use_lifo=True,
            pool_size=kw.pop("pool_size", 10),
            max_overflow=kw.pop("max_overflow", 20),
            pool_recycle=kw.pop("pool_recycle", pool_recycle_seconds()),
            connect_args={"connect_timeout": 5, **kw.pop("connect_args", {})},
            **kw,
        )
        # Every blocking exchange is watched: a hung (not dead) server is cut off within seconds
        # instead of holding the caller for as long as it stays hung (openkb/runtime/dbhang.py).
        event.listen(eng, "do_connect", _guarded_connect)
        _ping_idle_connections(eng, pool_ping_after_idle_seconds())
        _engines[url] = eng
    return eng


# The longest a pooled connection serves before it is closed and replaced, in seconds
# (docs/operations.md#environment-variables). A PostgreSQL backend keeps what it has cached for
# as long as it lives (catalog and relation caches, the plans of prepared statements, the heap of
# its largest query) and maps every shared buffer it has touched: the 10-minute soak measured its
# private memory growing about 0.4 MB per backend over its first minutes (bench/soak.py). A
# bounded lifetime caps that, like PgBouncer's ``server_lifetime``; it costs one new connection
# per pooled connection per lifetime (about 8 ms on the local socket, so 0.003% at 300 s) and also
# picks up role settings and DNS changes in production. Checked at checkout (SQLAlchemy's
# ``pool_recycle``): an idle connection past its lifetime is replaced when next used, inside the
# request that uses it. 0 turns it off.
def pool_recycle_seconds() -> float:
    value = _seconds_from_env("DB_POOL_RECYCLE_SECONDS", 300.0)
    return value if value > 0 else -1  # -1: SQLAlchemy's "never"


def _seconds_from_env(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        return float(raw) if raw else default
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, not {raw!r}") from None


# A pooled connection that sat idle at least this long is tested (one ``SELECT 1``) before it is
# handed out (docs/operations.md#outages). SQLAlchemy's ``pool_pre_ping`` tests every checkout:
# one more round trip on every unit of work, about a third of a point lookup's whole time on the
# local socket (``entities.resolve`` p95 1.5 ms with it, 1.0 ms without, bench/facts.py). What the
# test is for is a connection whose server went away while it sat in the pool (a restart, an
# idle timeout of a proxy or firewall), and that takes longer than a second. A connection used a
# moment ago that fails anyway (a crash within the second) fails its statement with a disconnect
# error: that request gets 503 like every request during the outage, and SQLAlchemy then drops
# every pooled connection, so the next checkouts connect anew. The pool hands out the most
# recently used connection first (``pool_use_lifo``), so a busy pool keeps its hot connections
# and the idle ones are the ones tested. 0 tests every checkout.
def pool_ping_after_idle_seconds() -> float:
    return max(_seconds_from_env("DB_POOL_PING_AFTER_IDLE_SECONDS", 1.0), 0.0)


def _ping_idle_connections(engine: Engine, after_s: float) -> None:
    dialect = engine.dialect

    def stamp(_dbapi_connection: Any, record: Any, *_: Any) -> None:
        record.info["openkb_idle_since"] = time.monotonic()

    def ping(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("openkb_idle_since")
        if since is not None and time.monotonic() - since < after_s:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except Exception as exc:  # noqa: BLE001 - the pool replaces the connection and retries
            raise DisconnectionError(f"pooled connection failed its test: {exc}") from exc

    event.listen(engine, "connect", stamp)  # a new connection was just tested by connecting
    event.listen(engine, "checkin", stamp)
    event.listen(engine, "checkout", ping)


def _guarded_connect(_dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
    return GuardedConnection.connect(*cargs, **cparams)


# Bounds of the API's request work (docs/operations.md#outages), in seconds: a statement (lock
# waits included) and a transaction left idle. Migrations, rebuilds, imports and CLI jobs run in
# other processes on engines without them; a long operation inside a request lifts them for its
# transaction (``lift_request_bounds``). The idle bound is above the slowest upload body the
# body guard lets through (server/body_limit.py), since an upload's transaction is open meanwhile.
REQUEST_STATEMENT_TIMEOUT_S = float(os.environ.get("DB_STATEMENT_TIMEOUT_SECONDS", "") or 30)
REQUEST_IDLE_IN_TRANSACTION_TIMEOUT_S = float(os.environ.get("DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS", "") or 900)


def bound_requests(
    engine: Engine,
    statement_s: float = REQUEST_STATEMENT_TIMEOUT_S,
    idle_in_transaction_s: float = REQUEST_IDLE_IN_TRANSACTION_TIMEOUT_S,
) -> None:
    """Give every connection ``engine`` hands out PostgreSQL's own bounds on request work:
    ``statement_timeout`` and ``idle_in_transaction_session_timeout`` (session settings, set once
    per connection on its first checkout, also on connections pooled before this call). The API
    calls it on its engine (server/app.py); calling it again with other values replaces them.

    Trap: the settings are per connection, so an engine shared with long work (a test process
    running jobs on the API's engine) gets them too; they are generous enough for a test's data.
    """
    bounds = (int(statement_s * 1000), int(idle_in_transaction_s * 1000))
    holder = _bounds.get(engine)
    if holder is None:
        holder = _bounds[engine] = [bounds]
        event.listen(engine, "checkout", lambda conn, record, _proxy: _apply_bounds(conn, record, holder[0]))
    holder[0] = bounds


_bounds: weakref.WeakKeyDictionary[Engine, list[tuple[int, int]]] = weakref.WeakKeyDictionary()


def _apply_bounds(dbapi_connection: Any, record: Any, bounds: tuple[int, int]) -> None:
    if record.info.get("openkb_bounds") == bounds:
        return
    try:
        with dbapi_connection.cursor() as cur:
            cur.execute(
                "SELECT set_config('statement_timeout', %s, false),"
                " set_config('idle_in_transaction_session_timeout', %s, false)",
                (f"{bounds[0]}ms", f"{bounds[1]}ms"),
            )
        dbapi_connection.commit()
    except Exception as exc:  # noqa: BLE001 - a connection that cannot take them is replaced
        raise DisconnectionError(f"could not set the request bounds: {exc}") from exc
    record.info["openkb_bounds"] = bounds


_UNBOUNDED = text(
    "SELECT set_config('statement_timeout', '0', true), set_config('idle_in_transaction_session_timeout', '0', true)"
)


def lift_request_bounds(session: Session) -> None:
    """Lift the request bounds (``bound_requests``) for the rest of ``session``'s transaction:
    for work inside the API that is long by nature and bounded otherwise (an export streamed to
    a client that reads at its own pace). ``SET LOCAL``: the pooled connection gets its bounds
    back with the next transaction."""
    session.execute(_UNBOUNDED)


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
    sqlstate = getattr(exc.orig, "sqlstate", None) or ""
    if sqlstate.startswith("40"):  # class 40: transaction rollback
        first = str(exc.orig).splitlines()[0] if exc.orig else "conflict"
        return TransactionConflict(f"a concurrent change got in the way ({first}); nothing was written", retry_after=1)
    if sqlstate in ("57014", "25P03"):  # statement_timeout, idle_in_transaction_session_timeout
        first = str(exc.orig).splitlines()[0] if exc.orig else "timeout"
        return DatabaseUnavailable(
            f"PostgreSQL did not finish within the request's time limit ({first}); nothing was written",
            retry_after=5,
        )
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
    """One unit of work: commit on success, rollback on any exception.

    The exception that ended the unit is the one raised, even when the rollback fails too: a
    Ctrl-C landing in an after-commit hook (inside ``session.commit()``) made the rollback raise
    "a commit is in progress", and that error replaced the KeyboardInterrupt, so the import's
    per-file error handling swallowed the interrupt and went on."""
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except OperationalError as exc:
        _rollback_quietly(session)
        raise database_error(exc) from None
    except BaseException:
        _rollback_quietly(session)
        raise
    finally:
        session.close()


def _rollback_quietly(session: Session) -> None:
    """Roll back for a unit that already failed; a rollback that fails as well is logged, never
    raised over the original error (``close()`` then discards the transaction)."""
    try:
        session.rollback()
    except Exception:  # noqa: BLE001 - the original exception is the one the caller must see
        log.warning("rollback after a failed unit of work failed too", exc_info=True)
