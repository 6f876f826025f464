"""Daily write quotas of an installation (docs/apps.md#limits-and-quotas), counted in PostgreSQL.

Per installation per local day (the database's time zone, ``CURRENT_DATE``): at most
``WRITES_PER_DAY`` writes and ``CHARS_PER_DAY`` written characters (``CHARS_PER_DAY_BULK`` with
``collections.bulk``). The user cannot raise them; they protect the instance.

``charge`` adds one write and its characters with one ``INSERT ... ON CONFLICT DO UPDATE``
inside the write's own transaction and refuses when the new totals pass a limit. The row lock
serializes concurrent writers of one installation, so replicas agree; a refused write rolls
back with its transaction, counter included. Trap: charge *after* deciding the write changes
something — an ``unchanged`` upsert is free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlmodel import Session

from openkb.config import Settings
from openkb.errors import AppQuotaExceeded

if TYPE_CHECKING:
    from openkb.apps.registry import AppCaller

WRITES_PER_DAY = 500
CHARS_PER_DAY = 50_000_000
CHARS_PER_DAY_BULK = 200_000_000

_CHARGE = text("""
INSERT INTO app_quota_usage (installation_id, day, writes, chars) VALUES (:i, CURRENT_DATE, 1, :n)
ON CONFLICT (installation_id, day)
DO UPDATE SET writes = app_quota_usage.writes + 1, chars = app_quota_usage.chars + EXCLUDED.chars
RETURNING writes, chars
""")


def char_limit(caller: AppCaller) -> int:
    return CHARS_PER_DAY_BULK if caller.has("collections.bulk") else CHARS_PER_DAY


def charge(session: Session, caller: AppCaller, chars: int, settings: Settings | None = None) -> None:  # noqa: ARG001
    writes, total = session.execute(_CHARGE, {"i": caller.installation_id, "n": int(chars)}).one()
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


def usage(session: Session, installation_id: object) -> dict[str, int]:
    row = session.execute(
        text("SELECT writes, chars FROM app_quota_usage WHERE installation_id = :i AND day = CURRENT_DATE"),
        {"i": installation_id},
    ).first()
    return {"writes": int(row.writes) if row else 0, "chars": int(row.chars) if row else 0}
