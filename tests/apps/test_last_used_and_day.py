"""``last_used_at`` on app credentials and the quota's local day in the user's time zone
(docs/apps.md#limits-and-quotas). On the rolled-back ``db`` session: ``now()`` is the
transaction's start, so every instant here is passed or set explicitly (no sleeping)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from openkb.accounts.account import update_profile
from openkb.apps import quotas, registry
from openkb.errors import AppQuotaExceeded, Unauthenticated, ValidationError
from tests.apps.conftest import AppWorld


def _stamp(aw: AppWorld) -> datetime | None:
    return aw.db.execute(
        text("SELECT last_used_at FROM app_credentials WHERE installation_id = :i AND status = 'active'"),
        {"i": aw.installation_id},
    ).scalar()


def _set_stamp(aw: AppWorld, ago: str | None) -> None:
    aw.db.execute(
        text(
            "UPDATE app_credentials SET last_used_at = CASE WHEN CAST(:ago AS text) IS NULL THEN NULL "
            "ELSE now() - CAST(:ago AS interval) END WHERE installation_id = :i"
        ),
        {"i": aw.installation_id, "ago": ago},
    )


def _now(aw: AppWorld) -> datetime:
    return aw.db.execute(text("SELECT now()")).scalar_one()


def test_a_call_stamps_last_used_at_at_most_once_a_minute(aw: AppWorld) -> None:
    assert _stamp(aw) is None
    inst = registry.access_installation(aw.db, aw.user, aw.installation_id)
    assert registry.installation_out(aw.db, inst)["last_used_at"] is None
    aw.caller()
    now = _now(aw)
    assert _stamp(aw) == now
    _set_stamp(aw, "30 seconds")  # used half a minute ago: this call writes nothing
    before = _stamp(aw)
    aw.caller()
    assert _stamp(aw) == before
    _set_stamp(aw, "61 seconds")  # a minute old: this call stamps it again
    aw.caller()
    assert _stamp(aw) == now
    listed = registry.list_installations(aw.db, aw.user)
    assert [i["last_used_at"] for i in listed if i["id"] == aw.installation_id] == [now]


def test_a_revoked_credential_is_not_stamped(aw: AppWorld) -> None:
    old = aw.token
    aw.token = registry.rotate_credential(aw.db, aw.user, aw.installation_id)
    aw.db.execute(text("UPDATE app_credentials SET last_used_at = NULL"))
    with pytest.raises(Unauthenticated, match="invalid or revoked"):
        registry.resolve_caller(aw.db, old, "s")
    stamps = aw.db.execute(
        text("SELECT status, last_used_at FROM app_credentials WHERE installation_id = :i"), {"i": aw.installation_id}
    ).all()
    assert {(s, t is None) for s, t in stamps} == {("revoked", True), ("active", True)}


def _use_up_day(aw: AppWorld, day: str) -> None:
    aw.db.execute(
        text("INSERT INTO app_quota_usage (installation_id, day, writes, chars) VALUES (:i, CAST(:d AS date), :w, 0)"),
        {"i": aw.installation_id, "d": day, "w": quotas.WRITES_PER_DAY},
    )


# 2026-03-01 23:59 and 2026-03-02 00:01 in Shanghai (UTC+8): still 1 March in UTC both times
BEFORE_MIDNIGHT = datetime(2026, 3, 1, 15, 59, tzinfo=UTC)
AFTER_MIDNIGHT = datetime(2026, 3, 1, 16, 1, tzinfo=UTC)


def test_the_quota_day_turns_at_the_users_midnight(aw: AppWorld) -> None:
    update_profile(aw.db, aw.user, display_name="me", time_zone="Asia/Shanghai")
    c = aw.caller()
    assert c.time_zone == "Asia/Shanghai"
    _use_up_day(aw, "2026-03-01")
    with pytest.raises(AppQuotaExceeded, match="quota"):
        with aw.db.begin_nested():
            quotas.charge(aw.db, c, 10, at=BEFORE_MIDNIGHT)
    quotas.charge(aw.db, c, 10, at=AFTER_MIDNIGHT)  # a new day in Shanghai
    assert quotas.usage(aw.db, aw.installation_id, at=AFTER_MIDNIGHT) == {"writes": 1, "chars": 10}
    assert quotas.usage(aw.db, aw.installation_id, at=BEFORE_MIDNIGHT)["writes"] == quotas.WRITES_PER_DAY


def test_without_a_time_zone_the_day_is_utcs(aw: AppWorld) -> None:
    c = aw.caller()
    assert c.time_zone == "UTC"
    _use_up_day(aw, "2026-03-01")
    for at in (BEFORE_MIDNIGHT, AFTER_MIDNIGHT):  # both still 1 March in UTC
        with pytest.raises(AppQuotaExceeded, match="quota"):
            with aw.db.begin_nested():
                quotas.charge(aw.db, c, 10, at=at)


def test_a_west_of_utc_user_is_still_on_yesterday(aw: AppWorld) -> None:
    update_profile(aw.db, aw.user, display_name="me", time_zone="America/Los_Angeles")
    c = aw.caller()
    _use_up_day(aw, "2026-03-01")
    # 2026-03-02 07:30 UTC is 23:30 on 1 March in Los Angeles (UTC-8): the used-up day
    with pytest.raises(AppQuotaExceeded, match="quota"):
        with aw.db.begin_nested():
            quotas.charge(aw.db, c, 10, at=datetime(2026, 3, 2, 7, 30, tzinfo=UTC))
    quotas.charge(aw.db, c, 10, at=datetime(2026, 3, 2, 8, 30, tzinfo=UTC))


def test_the_time_zone_must_be_one_postgresql_knows(aw: AppWorld) -> None:
    with pytest.raises(ValidationError, match="unknown time zone"):
        update_profile(aw.db, aw.user, display_name="me", time_zone="Mars/Olympus_Mons")
    u = update_profile(aw.db, aw.user, display_name="me", time_zone="Europe/Berlin")
    assert u.time_zone == "Europe/Berlin"
    assert update_profile(aw.db, aw.user, display_name="me 2").time_zone == "Europe/Berlin"  # absent: kept
    assert update_profile(aw.db, aw.user, display_name="me", time_zone="").time_zone is None  # empty: UTC
