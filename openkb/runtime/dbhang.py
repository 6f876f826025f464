"""A client-side bound on a *hung* PostgreSQL (docs/operations.md#outages).

A dead PostgreSQL is noticed at once (connection refused or reset). A hung one is not: stopped
(``SIGSTOP``, a paused VM, a frozen container) or behind a network path that silently drops
packets, it keeps its socket open, the kernel goes on accepting bytes, and a statement waits for
an answer that never comes: a request held its worker thread for as long as the server stayed
stopped. Nothing else bounds that wait: the server's ``statement_timeout`` cannot fire in a
stopped server, and TCP keepalives or libpq's ``tcp_user_timeout`` do not apply to the Unix
socket the embedded PostgreSQL listens on (nor, on a local machine, to a stopped process whose
kernel still acknowledges everything).

So the bound is here, on the client:

- every blocking exchange with the server (a statement, a commit, the pool's pre-ping) goes
  through ``psycopg.Connection.wait``; :class:`GuardedConnection` (the connection class
  ``openkb.db.get_engine`` uses) registers it with a watcher thread for as long as it waits;
- once an exchange has waited ``probe_after`` seconds, the watcher probes the same server with
  libpq's ``PQping`` (a fresh connection attempt with ``connect_timeout`` 2 s; no credentials
  needed, any answer counts). A server that answers is merely slow: the statement is left to the
  server's own ``statement_timeout`` and no other probe is made for ``probe_every`` seconds. A
  server that does not answer is hung: every exchange with it that was waiting when the probe
  began is cut (its socket shut down), so the caller gets psycopg's ``OperationalError``
  ("server closed the connection unexpectedly"), which SQLAlchemy treats as a disconnect (the
  connection is dropped from the pool) and ``openkb.db.database_error`` turns into 503
  ``DATABASE_UNAVAILABLE``.

A request then gets its 503 about ``probe_after`` + 2 s after PostgreSQL stopped answering (plus
the 5 s connect timeout when the pool has to open a new connection), instead of hanging; once the
server answers again, the next request is served.

Traps: a socket is shut down only while its wait is still registered, under the lock, from a
``dup`` of its descriptor (shutdown acts on the socket, closing the duplicate leaves the
connection's own descriptor alone): a descriptor closed and reused meanwhile could belong to
anything. And the overriding of ``wait`` relies on psycopg routing every blocking exchange of a
connection through that method (psycopg 3.1 to 3.3 do); tests/faults/test_hung_database.py fails
if that stops being true.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

log = logging.getLogger("openkb.db.hang")

PROBE_AFTER_S = float(os.environ.get("OPENKB_DB_HANG_PROBE_SECONDS", "") or 2.0)
PROBE_TIMEOUT_S = 2  # libpq's smallest connect_timeout
PROBE_EVERY_S = 5.0  # after a probe the server answered: the next one no sooner than this
TICK_S = 0.25


def ping(dsn: str) -> bool:
    """Whether the server named by ``dsn`` answers a connection attempt at all (``PQping``:
    accepted or rejected both count; only no answer within the timeout does not)."""
    from psycopg import pq
    from psycopg.conninfo import make_conninfo

    conninfo = make_conninfo(dsn, connect_timeout=PROBE_TIMEOUT_S)
    return bool(pq.PGconn.ping(conninfo.encode()) != pq.Ping.NO_RESPONSE)


@dataclass
class _Wait:
    fd: int
    dsn: str
    since: float


class HangWatch:
    """The waits in flight and the watcher thread that cuts those on a server gone silent."""

    def __init__(
        self,
        probe_after: float = PROBE_AFTER_S,
        probe_every: float = PROBE_EVERY_S,
        probe: Callable[[str], bool] = ping,
        *,
        background: bool = True,
    ) -> None:
        self.background = background  # False: no watcher thread, the caller runs ``check`` (tests)
        self.probe_after = probe_after
        self.probe_every = probe_every
        self.probe = probe
        self.cuts = 0  # exchanges cut since start (tests and logs read it)
        self._lock = threading.Lock()
        self._waits: dict[int, _Wait] = {}
        self._tokens = itertools.count(1)
        self._answered_at: dict[str, float] = {}
        self._thread_pid: int | None = None

    def enter(self, fd: int, dsn: str) -> int:
        token = next(self._tokens)
        with self._lock:
            self._waits[token] = _Wait(fd, dsn, time.monotonic())
            if self.background and self._thread_pid != os.getpid():  # first use, or a forked child: no thread yet
                self._thread_pid = os.getpid()
                threading.Thread(target=self._run, name="openkb-db-hang-watch", daemon=True).start()
        return token

    def leave(self, token: int) -> None:
        with self._lock:
            self._waits.pop(token, None)

    def _run(self) -> None:
        while True:
            time.sleep(TICK_S)
            try:
                self.check()
            except Exception:  # noqa: BLE001 - the watcher must outlive any one failure
                log.exception("checking for a hung PostgreSQL failed")

    def check(self) -> int:
        """One round: probe the servers with a wait older than ``probe_after`` (at most one probe
        per server per ``probe_every`` while it answers); cut the waits on a silent one. Returns
        how many waits were cut."""
        now = time.monotonic()
        with self._lock:
            stale: dict[str, list[int]] = {}
            for token, w in self._waits.items():
                if now - w.since >= self.probe_after:
                    stale.setdefault(w.dsn, []).append(token)
        cut = 0
        for dsn, tokens in stale.items():
            if now - self._answered_at.get(dsn, float("-inf")) < self.probe_every:
                continue  # it answered a moment ago: a slow statement, the server's own bound applies
            if self.probe(dsn):
                self._answered_at[dsn] = time.monotonic()
                continue
            n = sum(1 for token in tokens if self._cut(token))
            if n:
                cut += n
                log.warning(
                    "PostgreSQL (%s) does not answer (a connection attempt timed out after %d s): cut %d "
                    "exchange(s) waiting for more than %.0f s",
                    _where(dsn),
                    PROBE_TIMEOUT_S,
                    n,
                    self.probe_after,
                )
        self.cuts += cut
        return cut

    def _cut(self, token: int) -> bool:
        with self._lock:
            w = self._waits.get(token)
            if w is None:
                return False  # it finished meanwhile; its descriptor may already be reused
            try:
                dup = os.dup(w.fd)
            except OSError:
                return False
        try:
            sock = socket.socket(fileno=dup)
        except OSError:
            os.close(dup)
            return False
        try:
            sock.shutdown(socket.SHUT_RDWR)
            return True
        except OSError:
            return False
        finally:
            sock.close()


def _where(dsn: str) -> str:
    """host and port of a dsn for the log line (never the whole dsn)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        d = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "?"
    return f"{d.get('host', 'localhost')}:{d.get('port', 5432)}"


WATCH = HangWatch()


class GuardedConnection(psycopg.Connection):  # type: ignore[type-arg]
    """A psycopg connection whose every blocking exchange is watched by :data:`WATCH`."""

    _openkb_dsn: str | None = None

    def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            fd = self.pgconn.socket
            dsn = self._openkb_dsn
            if dsn is None:
                dsn = self._openkb_dsn = self.info.dsn  # without the password
        except psycopg.Error:
            return super().wait(gen, *args, **kwargs)  # a closed connection: psycopg says so
        token = WATCH.enter(fd, dsn)
        try:
            return super().wait(gen, *args, **kwargs)
        finally:
            WATCH.leave(token)
