"""POST /api/admin/users/<id>/role: a tenant admin makes a member tenant admin and back."""

from __future__ import annotations

import uuid

from sqlmodel import select

from openkb.models import AuditLog
from tests.api.helpers import login, make_login_user


def test_make_tenant_admin_and_back(live_server, committed):
    admin, user = make_login_user(committed, role="tenant_admin"), make_login_user(committed)
    with login(live_server, user.email) as u:
        assert u.get("/api/admin/users").status_code == 403
    with login(live_server, admin.email) as a:
        r = a.post(f"/api/admin/users/{user.user_id}/role", json={"role": "tenant_admin"})
        assert r.status_code == 200 and r.json()["role"] == "tenant_admin", r.text
        with login(live_server, user.email) as u:
            assert u.get("/api/admin/users").status_code == 200  # now an administrator
        assert a.post(f"/api/admin/users/{user.user_id}/role", json={"role": "member"}).json()["role"] == "member"
        assert a.post(f"/api/admin/users/{admin.user_id}/role", json={"role": "member"}).status_code == 403  # self
        assert a.post(f"/api/admin/users/{uuid.uuid4()}/role", json={"role": "member"}).status_code == 404
        assert a.post(f"/api/admin/users/{user.user_id}/role", json={"role": "system_admin"}).status_code == 422
    with login(live_server, user.email) as u:
        assert u.get("/api/admin/users").status_code == 403
    with committed() as s:
        rows = s.exec(
            select(AuditLog).where(AuditLog.action == "user.role_changed", AuditLog.object_id == user.user_id)
        )
        changes = sorted((r.meta["before"]["role"], r.meta["after"]["role"]) for r in rows)
    assert changes == [("member", "tenant_admin"), ("tenant_admin", "member")]
