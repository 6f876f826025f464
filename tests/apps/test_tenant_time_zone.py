"""The tenant's default time zone (docs/accounts.md#tenant-settings): the apps' quota day of a
member who set no zone of their own. In process on the rolled-back ``db`` session (instants are
explicit: ``now()`` is the transaction's start), then once over HTTP and once from the CLI."""

from __future__ import annotations

import json

import pytest

from openkb.accounts.account import update_profile
from openkb.accounts.tenant_settings import read_settings, set_time_zone
from openkb.apps import quotas
from openkb.errors import AppQuotaExceeded, NotFound, PermissionDenied, ValidationError
from openkb.models import Tenant
from openkb.permissions import Principal
from tests.api.helpers import login, make_login_user
from tests.apps.conftest import AppWorld
from tests.apps.test_last_used_and_day import AFTER_MIDNIGHT, BEFORE_MIDNIGHT, _use_up_day
from tests.factories import make_tenant, make_user
from tests.test_cli import assert_one_line_error, db_env, run  # noqa: F401 - db_env is a fixture


def _refused(aw: AppWorld, c, at) -> None:
    with pytest.raises(AppQuotaExceeded, match="quota"):
        with aw.db.begin_nested():
            quotas.charge(aw.db, c, 10, at=at)


def test_a_user_without_a_zone_follows_the_tenants_default_across_midnight(aw: AppWorld) -> None:
    set_time_zone(aw.db, Principal.system(), aw.tenant_id, "Asia/Shanghai")
    c = aw.caller()
    assert c.time_zone == "Asia/Shanghai"
    _use_up_day(aw, "2026-03-01")
    _refused(aw, c, BEFORE_MIDNIGHT)  # 23:59 on 1 March in Shanghai
    quotas.charge(aw.db, c, 10, at=AFTER_MIDNIGHT)  # 00:01 on 2 March there (still 1 March in UTC)
    assert quotas.usage(aw.db, aw.installation_id, at=AFTER_MIDNIGHT) == {"writes": 1, "chars": 10}
    # the user's own zone wins over the tenant's; cleared, the tenant's applies again
    update_profile(aw.db, aw.user, display_name="me", time_zone="America/Los_Angeles")
    assert aw.caller().time_zone == "America/Los_Angeles"
    update_profile(aw.db, aw.user, display_name="me", time_zone="")
    assert aw.caller().time_zone == "Asia/Shanghai"
    # no default either: UTC, where AFTER_MIDNIGHT is still the used-up 1 March
    set_time_zone(aw.db, Principal.system(), aw.tenant_id, None)
    c = aw.caller()
    assert c.time_zone == "UTC"
    _refused(aw, c, AFTER_MIDNIGHT)


def test_who_may_set_it_and_what_it_accepts(aw: AppWorld) -> None:
    tenant = aw.db.get(Tenant, aw.tenant_id)
    admin = make_user(aw.db, tenant, role="tenant_admin")
    as_admin = Principal.user(admin.id, aw.tenant_id)
    with pytest.raises(ValidationError, match="unknown time zone") as e:
        set_time_zone(aw.db, as_admin, None, "Mars/Olympus_Mons")
    assert e.value.code == "VALIDATION_ERROR" and e.value.http_status == 422  # as the profile's
    assert set_time_zone(aw.db, as_admin, None, " Europe/Berlin ")["time_zone"] == "Europe/Berlin"
    assert read_settings(aw.db, as_admin)["time_zone"] == "Europe/Berlin"
    with pytest.raises(PermissionDenied):
        set_time_zone(aw.db, aw.user, None, "Asia/Tokyo")  # a member
    elsewhere = make_tenant(aw.db)
    with pytest.raises(NotFound):
        set_time_zone(aw.db, as_admin, elsewhere.id, "Asia/Tokyo")  # not their tenant


def test_over_http_and_from_the_cli(live_server, committed, db_env) -> None:  # noqa: F811 - the fixture
    with committed() as s:
        tenant = make_tenant(s)
        s.commit()
        slug = tenant.slug
    admin = make_login_user(committed, tenant, role="tenant_admin")
    with login(live_server, admin.email) as c:
        r = c.put("/api/admin/tenant-settings", json={"time_zone": "Asia/Shanghai"})
        assert r.status_code == 200 and r.json()["time_zone"] == "Asia/Shanghai", r.text
        assert c.get("/api/admin/tenant-settings").json()["tenant_slug"] == slug
        bad = c.put("/api/admin/tenant-settings", json={"time_zone": "Mars/Olympus_Mons"})
        profile = c.put("/api/me/profile", json={"display_name": "a", "time_zone": "Mars/Olympus_Mons"})
        assert bad.status_code == profile.status_code == 422
        assert bad.json()["error"] == profile.json()["error"] == "VALIDATION_ERROR"
    p = run(["tenant", "time-zone", slug, "--clear", "--json"], env=db_env)  # two subprocesses: lean
    assert p.returncode == 0 and json.loads(p.stdout)["time_zone"] is None, (p.stdout, p.stderr)
    with committed() as s:
        assert s.get(Tenant, tenant.id).time_zone is None
    assert_one_line_error(run(["tenant", "time-zone", slug, "Mars/Olympus_Mons"], env=db_env), 2, "unknown time zone")
