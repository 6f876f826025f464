"""Daily write quotas of an installation (docs/apps.md#limits-and-quotas), counted in PostgreSQL.

Per installation per local day — the *user's* day: ``users.time_zone`` (set on the profile;
when NULL the tenant's default ``tenants.time_zone``, else UTC), computed by PostgreSQL from its own clock so replicas agree — at most
``WRITES_PER_DAY`` writes and ``CHARS_PER_DAY`` written characters (``CHARS_PER_DAY_BULK`` with
``collections.bulk``). The user cannot raise them; they protect the instance.

``charge`` adds one write and its characters with one ``INSERT ... ON CONFLICT DO UPDATE``
inside the write's own transaction and refuses when the new totals pass a limit. The row lock
serializes concurrent writers of one installation, so replicas agree; a refused write rolls
back with its transaction, counter included. Trap: charge *after* deciding the write changes
something — an ``unchanged`` upsert is free. Trap: never ``CURRENT_DATE`` (the database
session's zone): for a user in Asia/Shanghai the day turns at 16:00 UTC.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlmodel import Session

from openkb.config import Settings
from openkb.errors import AppQuotaExceeded

if TYPE_CHECKING:
    from openkb.apps.registry import AppCaller

WRITES_PER_DAY = 500
CHARS_PER_DAY = 50_000_000
CHARS_PER_DAY_BULK = 200_000_000

# the zone of an installation's day (``i``) of a user (``u``): the user's own, else the tenant's
# default (``openkb tenant time-zone``), else UTC; the tenant is read only when the user has none
TIME_ZONE_SQL = "coalesce(u.time_zone, (SELECT tz.time_zone FROM tenants tz WHERE tz.id = i.tenant_id), 'UTC')"
# the local day of ``:at`` (now when NULL) in the user's zone
_DAY = "(coalesce(CAST(:at AS timestamptz), now()) AT TIME ZONE :tz)::date"


def charge_sql(only_if: str | None = None) -> str:
    """The charge as SQL text, for a hot writer that runs it as a CTE of its own statement (one
    round trip, ``openkb.facts.service``) with ``charge_params`` and hands the totals to
    ``refuse_over``. ``only_if``: an SQL condition (e.g. ``EXISTS (SELECT 1 FROM go)``); when it
    is false nothing is charged and no row comes back."""
    row = f"VALUES (:i, {_DAY}, 1, :n)" if only_if is None else f"SELECT :i, {_DAY}, 1, :n WHERE {only_if}"
    return f"""
INSERT INTO app_quota_usage (installation_id, day, writes, chars) {row}
ON CONFLICT (installation_id, day)
DO UPDATE SET writes = app_quota_usage.writes + 1, chars = app_quota_usage.chars + EXCLUDED.chars
RETURNING writes, chars
"""


CHARGE_SQL = charge_sql()
_CHARGE = text(CHARGE_SQL)
# a created document: its writer row goes in the same statement as the charge (one round trip)
_CHARGE_WRITER = text(
    "WITH writer AS (INSERT INTO app_documents (document_id, installation_id, origin, source) "
    "VALUES (:d, :i, :origin, :source))" + CHARGE_SQL
)
_USAGE = text(f"""
SELECT q.writes, q.chars FROM app_quota_usage q
JOIN app_installations i ON i.id = q.installation_id JOIN users u ON u.id = i.user_id
WHERE q.installation_id = :i
  AND q.day = (coalesce(CAST(:at AS timestamptz), now()) AT TIME ZONE {TIME_ZONE_SQL})::date
""")


def char_limit(caller: AppCaller) -> int:
    return CHARS_PER_DAY_BULK if caller.has("collections.bulk") else CHARS_PER_DAY


def charge(
    session: Session,
    caller: AppCaller,
    chars: int,
    settings: Settings | None = None,  # noqa: ARG001
    *,
    at: datetime | None = None,
    writer_of: tuple[object, str, str] | None = None,
) -> None:
    """One write of ``chars`` characters on the user's day of ``at`` (default: now).
    ``writer_of=(document_id, origin, source)``: the write created that document; the
    installation is recorded as its writer (``app_documents``) in the same statement. Trap:
    that row is written with SQL, so the ORM session does not hold it."""
    params = charge_params(caller, chars, at)
    if writer_of is None:
        writes, total = session.execute(_CHARGE, params).one()
    else:
        params.update(zip(("d", "origin", "source"), writer_of, strict=True))
        writes, total = session.execute(_CHARGE_WRITER, params).one()
    refuse_over(caller, writes, total)


def charge_params(caller: AppCaller, chars: int, at: datetime | None = None) -> dict[str, Any]:
    """``CHARGE_SQL``'s parameters: ``i`` (the installation), ``n``, ``at``, ``tz``."""
    return {"i": caller.installation_id, "n": int(chars), "at": at, "tz": caller.time_zone}


def refuse_over(caller: AppCaller, writes: int, total: int) -> None:
    """``AppQuotaExceeded`` when the day's totals after a charge pass a limit."""
    if writes > WRITES_PER_DAY:
        raise AppQuotaExceeded(
            f"daily write quota of {WRITES_PER_DAY} writes used up; try again tomorrow",
            limit="writes",
            max=WRITES_PER_DAY,
            retry_after=3600,
        )
    cap = char_limit(caller)
    if total > cap:
        raise AppQuotaExceeded(
            f"daily quota of {cap:,} written characters used up; try again tomorrow",
            limit="chars",
            max=cap,
            retry_after=3600,
        )


def usage(session: Session, installation_id: object, *, at: datetime | None = None) -> dict[str, int]:
    """What the installation used on its user's day of ``at`` (default: today)."""
    row = session.execute(_USAGE, {"i": installation_id, "at": at}).first()
    return {"writes": int(row.writes) if row else 0, "chars": int(row.chars) if row else 0}
