"""Fixed-window rate limits shared by every replica, in the ``rate_limit_buckets`` table.

One atomic ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING count`` per hit: concurrent callers
serialise on the row lock, so no two of them see the same count. Windows are aligned to the
database clock (``clock_timestamp()``), not the replica's, so skewed app servers agree.

Trap: the counter is written through the session it is given. A failed attempt must be
committed to count although the request then fails, so a service hits the counter with
``openkb.db.record_then_refuse`` (a transaction of its own) and then raises (see
``share_links.open_share_link``). Where parallel attempts must not all pass a peek (``count``)
before any is counted, book the attempt first with ``hit`` in a transaction of its own
(``openkb.db.commit_apart``) and ``give_back`` what turned out fine (``accounts.sessions.login``).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text
from sqlmodel import Session

from openkb.errors import RateLimited, ValidationError

_HIT_SQL = text(
    """
WITH w AS (
    SELECT to_timestamp(floor(extract(epoch FROM coalesce(CAST(:now AS timestamptz), clock_timestamp()))
                              / :window) * :window) AS start
)
INSERT INTO rate_limit_buckets AS b (key, window_start, count)
SELECT :key, w.start, 1 FROM w
ON CONFLICT (key) DO UPDATE SET
    count = CASE WHEN b.window_start >= EXCLUDED.window_start THEN b.count + 1 ELSE 1 END,
    window_start = greatest(b.window_start, EXCLUDED.window_start)
RETURNING count
"""
)

_PEEK_SQL = text(
    """
SELECT b.count FROM rate_limit_buckets b
WHERE b.key = :key
  AND b.window_start >= to_timestamp(floor(extract(epoch FROM coalesce(CAST(:now AS timestamptz), clock_timestamp()))
                                           / :window) * :window)
"""
)


def _check(limit: int, window_s: int) -> None:
    if limit < 1 or window_s < 1:
        raise ValidationError("rate limit and window must be positive")


def hit(session: Session, key: str, limit: int, window_s: int, *, now: datetime | None = None) -> bool:
    """Count one event; True while the window's count is within ``limit``."""
    _check(limit, window_s)
    count = session.execute(_HIT_SQL, {"key": key, "window": window_s, "now": now}).scalar_one()
    return int(count) <= limit


def enforce(session: Session, key: str, limit: int, window_s: int, *, now: datetime | None = None) -> None:
    """Count one event and raise ``RateLimited`` once the window is over ``limit``."""
    if not hit(session, key, limit, window_s, now=now):
        raise RateLimited("too many attempts, try again later", retry_after=window_s)


_GIVE_BACK_SQL = text(
    """
UPDATE rate_limit_buckets SET count = count - 1
WHERE key = :key AND count > 0
  AND window_start >= to_timestamp(floor(extract(epoch FROM coalesce(CAST(:now AS timestamptz), clock_timestamp()))
                                         / :window) * :window)
"""
)


def give_back(session: Session, key: str, window_s: int, *, now: datetime | None = None) -> None:
    """Un-count one event of the current window (an attempt booked with ``hit`` before it was
    checked, which turned out fine). Nothing when the window has moved on since."""
    _check(1, window_s)
    session.execute(_GIVE_BACK_SQL, {"key": key, "window": window_s, "now": now})


def count(session: Session, key: str, window_s: int, *, now: datetime | None = None) -> int:
    """Events counted in the current window, without counting one (check before an attempt)."""
    _check(1, window_s)
    got = session.execute(_PEEK_SQL, {"key": key, "window": window_s, "now": now}).scalar_one_or_none()
    return int(got or 0)


def exceeded(session: Session, key: str, limit: int, window_s: int, *, now: datetime | None = None) -> bool:
    return count(session, key, window_s, now=now) >= limit
