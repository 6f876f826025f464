"""The tenant's default time zone in the admin console (docs/accounts.md#tenant-settings): a
tenant_admin sets it, it survives a reload and the API reads it back; an unknown zone is the
server's 422, shown under the field. A tenant of its own, so no other test's quota day moves."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.api.helpers import login, make_login_user
from tests.factories import make_tenant
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.slow


def test_tenant_admin_sets_the_default_time_zone(contexts, live_server, committed):
    with committed() as s:
        tenant = make_tenant(s)
        s.commit()
    admin = make_login_user(committed, tenant, role="tenant_admin")
    page = contexts.page()
    sign_in(page, admin.email)
    with page.expect_response(lambda r: r.url.endswith("/api/admin/tenant-settings")) as got:
        page.goto("/admin/registration")
    assert got.value.status == 200
    section = page.get_by_role("region", name="Default time zone")
    zone = section.get_by_role("combobox", name="Default time zone")
    expect(zone).to_have_value("")  # unset: UTC
    expect(section).to_contain_text("members who have not set their own time zone")

    zone.fill("Asia/Shanghai")
    with page.expect_response(
        lambda r: r.url.endswith("/api/admin/tenant-settings") and r.request.method == "PUT"
    ) as put:
        section.get_by_role("button", name="Save time zone", exact=True).click()
    assert put.value.status == 200
    expect(section.get_by_role("status")).to_have_text("Saved")
    with page.expect_response(lambda r: r.url.endswith("/api/admin/tenant-settings")):
        page.reload()
    expect(zone).to_have_value("Asia/Shanghai")
    with login(live_server, admin.email) as c:
        assert c.get("/api/admin/tenant-settings").json()["time_zone"] == "Asia/Shanghai"

    zone.fill("Mars/Olympus_Mons")
    with page.expect_response(
        lambda r: r.url.endswith("/api/admin/tenant-settings") and r.request.method == "PUT"
    ) as put:
        section.get_by_role("button", name="Save time zone", exact=True).click()
    assert put.value.status == 422
    expect(page.locator("#tenant-zone-error")).to_contain_text("unknown time zone")
    expect(zone).to_have_attribute("aria-invalid", "true")
