"""Deleting a user from the admin console (docs/accounts.md#deleting-a-user): soft delete and
anonymize, everything that lets them act goes, ownership passes to a named successor, the last
system administrator stays; and a system_admin makes someone tenant admin of another tenant."""

from __future__ import annotations

import uuid

import pytest
from sqlmodel import Session, select

from openkb.accounts.deletion import anonymous_email, delete_user
from openkb.errors import Conflict
from openkb.models import AuditLog, TenantMembership, User, WorkspaceMember
from openkb.permissions.principal import Principal
from tests.api.helpers import bearer_client, login, make_login_user, make_user_with_pat
from tests.factories import make_tenant


@pytest.fixture(scope="module")
def tenant(engine):
    with Session(engine) as s:
        t = make_tenant(s)
        s.commit()
        s.refresh(t)
        s.expunge(t)
        return t


def test_delete_user_hands_over_and_takes_everything_away(live_server, committed, tenant):
    admin = make_login_user(committed, tenant, role="tenant_admin")
    leaver = make_login_user(committed, tenant)
    heir = make_login_user(committed, tenant)
    outsider = make_login_user(committed)  # the default tenant
    with committed() as s:
        _, pat = make_user_with_pat(committed, tenant, user=s.get(User, leaver.user_id))
    with login(live_server, leaver.email) as c:
        ws = c.post("/api/workspaces", json={"name": f"Leaver {uuid.uuid4().hex[:6]}"}).json()
        kb = c.post("/api/knowledge-bases", json={"workspace_id": ws["id"], "title": "Notes"}).json()
        doc = c.post(
            "/api/documents", json={"knowledge_base_id": kb["id"], "title": "Kept", "markdown": "# Kept\n"}
        ).json()
        leaver_session = c.cookies
    with bearer_client(live_server, pat) as b:
        assert b.get("/api/workspaces").status_code == 200

    with login(live_server, admin.email) as a:
        assert a.post(f"/api/admin/users/{admin.user_id}/delete").status_code == 403  # oneself
        assert a.post(f"/api/admin/users/{outsider.user_id}/delete").status_code == 404  # another tenant
        r = a.post(f"/api/admin/users/{leaver.user_id}/delete")
        assert r.status_code == 409, r.text
        assert (r.json()["reason"], r.json()["workspaces"], r.json()["objects"]) == ("owns_content", 1, 1)
        r = a.post(f"/api/admin/users/{leaver.user_id}/delete", json={"successor_id": str(outsider.user_id)})
        assert r.status_code == 422, r.text  # the successor must be of the tenant
        r = a.post(f"/api/admin/users/{leaver.user_id}/delete", json={"successor_id": str(heir.user_id)})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["user"]["status"] == "deleted" and body["user"]["email"] == anonymous_email(leaver.user_id)
        assert body["counts"]["workspaces_handed_over"] == 1 and body["counts"]["tokens_revoked"] == 1
        assert body["counts"]["sessions_revoked"] >= 1
        # idempotent
        assert a.post(f"/api/admin/users/{leaver.user_id}/delete").status_code == 200
        listed = a.get("/api/admin/users", params={"status": "deleted", "q": "deleted-"}).json()["items"]
        assert str(leaver.user_id) in {u["id"] for u in listed}

    # nothing the leaver held still works
    with bearer_client(live_server, pat) as b:
        assert b.get("/api/workspaces").status_code == 401
    import httpx

    with httpx.Client(base_url=live_server, cookies=leaver_session) as c:
        assert c.get("/api/auth/me").status_code == 401
    r = httpx.post(live_server + "/api/auth/login", json={"email": leaver.email, "password": leaver.password})
    assert r.status_code == 401
    # the successor owns what the leaver owned, and the content is still there
    with login(live_server, heir.email) as h:
        assert h.get(f"/api/workspaces/{ws['id']}").json()["role"] == "owner"
        assert "manage" in h.get(f"/api/knowledge-bases/{kb['id']}").json()["capabilities"]
        assert h.get(f"/api/documents/{doc['id']}").status_code == 200
    with committed() as s:
        assert s.exec(select(WorkspaceMember).where(WorkspaceMember.user_id == leaver.user_id)).all() == []
        row = s.exec(
            select(AuditLog).where(AuditLog.action == "user.deleted", AuditLog.object_id == leaver.user_id)
        ).one()
        assert row.meta["email"] == leaver.email and row.meta["successor_id"] == str(heir.user_id)
        assert row.actor_user_id == admin.user_id
    # the address is free again
    again = make_login_user(committed, tenant, email=leaver.email)
    assert again.user_id != leaver.user_id


def test_last_system_admin_and_cross_tenant_role(live_server, committed, tenant):
    with committed() as s:
        existing = s.exec(select(TenantMembership.user_id).where(TenantMembership.role == "system_admin")).all()
    sys_a = make_login_user(committed, role="system_admin")
    sys_b = make_login_user(committed, role="system_admin")
    other_admin = make_login_user(committed, tenant, role="tenant_admin")
    member = make_login_user(committed, tenant)
    with login(live_server, other_admin.email) as t:
        assert t.post(f"/api/admin/users/{sys_a.user_id}/delete").status_code == 404  # not in their tenant

    with login(live_server, sys_a.email) as a:
        # cross-tenant: a system_admin makes a user of another tenant its tenant admin
        with committed() as s:
            default_tid = s.exec(
                select(TenantMembership.tenant_id).where(TenantMembership.user_id == sys_a.user_id)
            ).one()
        r = a.post(
            f"/api/admin/users/{member.user_id}/role", json={"role": "tenant_admin", "tenant_id": str(tenant.id)}
        )
        assert r.status_code == 200 and r.json()["tenant_id"] == str(tenant.id), r.text
        r = a.post(f"/api/admin/users/{member.user_id}/role", json={"role": "member", "tenant_id": str(default_tid)})
        assert r.status_code == 404, r.text  # no membership there
        r = a.post(f"/api/admin/users/{sys_b.user_id}/delete")
        assert r.status_code == 200, r.text
    with login(live_server, other_admin.email) as t:
        r = t.post(f"/api/admin/users/{member.user_id}/role", json={"role": "member", "tenant_id": str(default_tid)})
        assert r.status_code == 404, r.text  # a tenant_admin acts in their tenant only
        assert t.post(f"/api/admin/users/{member.user_id}/role", json={"role": "member"}).status_code == 200

    # with every other system_admin gone, the last one stays
    with committed() as s:
        for uid in existing:
            s.exec(select(User).where(User.id == uid)).one().status = "suspended"
        s.commit()
    try:
        with committed() as s, pytest.raises(Conflict) as err:
            delete_user(s, Principal.system(), sys_a.user_id)
        assert err.value.extra["reason"] == "last_system_admin"
    finally:
        with committed() as s:
            for uid in existing:
                s.exec(select(User).where(User.id == uid)).one().status = "active"
            s.commit()
