"""/api/admin over HTTP: who may use it, tenant scoping, status changes, settings, audit log."""

from __future__ import annotations

import uuid

import pytest
from sqlmodel import select

from openkb.models import AuditLog
from tests.api.helpers import (
    PASSWORD,
    bearer_client,
    login,
    mailed_token,
    make_login_user,
    make_user_with_pat,
    outbox_messages,
)
from tests.factories import make_tenant

ADMIN_ROUTES = [
    ("GET", "/api/admin/users"),
    ("POST", "/api/admin/users/{uid}/activate"),
    ("POST", "/api/admin/users/{uid}/suspend"),
    ("POST", "/api/admin/users/{uid}/reject"),
    ("POST", "/api/admin/users/{uid}/resend-verification"),
    ("GET", "/api/admin/auth-settings"),
    ("PUT", "/api/admin/auth-settings"),
    ("GET", "/api/admin/audit-logs"),
]


@pytest.fixture()
def org(committed):
    """A fresh tenant with a tenant_admin, a member, a pending user, and a user of another tenant."""
    with committed() as s:
        t = make_tenant(s)
        other = make_tenant(s)
        s.commit()
    return {
        "tenant": t,
        "other": other,
        "admin": make_login_user(committed, t, role="tenant_admin"),
        "member": make_login_user(committed, t),
        "pending": make_login_user(committed, t, status="pending_activation"),
        "unverified": make_login_user(committed, t, status="pending_email_verification"),
        "outsider": make_login_user(committed, other),
    }


@pytest.fixture()
def admin_c(http, org):
    with login(http, org["admin"].email) as c:
        yield c


def _call(c, method, path, **kw):
    if method == "PUT":
        kw.setdefault("json", {})
    return c.request(method, path, **kw)


def test_non_admins_are_refused(http, org):
    uid = org["pending"].user_id
    with login(http, org["member"].email) as c:
        for method, path in ADMIN_ROUTES:
            r = _call(c, method, path.format(uid=uid))
            assert r.status_code == 403, (method, path, r.text)
            assert r.json()["error"] == "PERMISSION_DENIED"
    for method, path in ADMIN_ROUTES:
        r = _call(http, method, path.format(uid=uid))
        assert r.status_code == 401 and r.json()["error"] == "UNAUTHENTICATED", (method, path)


def test_admin_writes_need_csrf(live_server, http, org):
    import httpx

    r = http.post("/api/auth/login", json={"email": org["admin"].email, "password": PASSWORD})
    with httpx.Client(base_url=live_server, cookies=r.cookies) as c:
        r = c.post(f"/api/admin/users/{org['pending'].user_id}/activate")
    assert r.status_code == 403 and r.json()["error"] == "CSRF_FAILED"


def test_list_users_scoped_to_tenant(admin_c, org):
    body = admin_c.get("/api/admin/users").json()
    emails = {u["email"] for u in body["items"]}
    assert emails == {org[k].email for k in ("admin", "member", "pending", "unverified")}
    assert body["total"] == 4 and all(u["tenant_slug"] == org["tenant"].slug for u in body["items"])
    assert "password_hash" not in str(body)

    pending = admin_c.get("/api/admin/users", params={"status": "pending_activation"}).json()
    assert [u["email"] for u in pending["items"]] == [org["pending"].email]
    page = admin_c.get("/api/admin/users", params={"limit": 2, "offset": 0}).json()
    assert len(page["items"]) == 2 and page["total"] == 4

    r = admin_c.get("/api/admin/users", params={"status": "bogus"})
    assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR"
    r = admin_c.get("/api/admin/users", params={"tenant_id": str(org["other"].id)})
    assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND"


def test_activate_and_suspend_are_audited(admin_c, org, committed):
    uid = org["pending"].user_id
    r = admin_c.post(f"/api/admin/users/{uid}/activate")
    assert r.status_code == 200 and r.json()["user"]["status"] == "active"
    # idempotent
    assert admin_c.post(f"/api/admin/users/{uid}/activate").json()["user"]["status"] == "active"
    r = admin_c.post(f"/api/admin/users/{uid}/suspend")
    assert r.status_code == 200 and r.json()["user"]["status"] == "suspended"

    with committed() as s:
        rows = list(s.exec(select(AuditLog).where(AuditLog.object_id == uid).order_by(AuditLog.created_at)))
    acts = [(r.action, r.meta["before"]["status"], r.meta["after"]["status"]) for r in rows]
    assert acts == [("user.activated", "pending_activation", "active"), ("user.suspended", "active", "suspended")]
    assert all(r.actor_user_id == org["admin"].user_id and r.tenant_id == org["tenant"].id for r in rows)
    assert rows[0].ip == "127.0.0.1"

    # and visible through the audit-log route, filtered and paged
    logs = admin_c.get("/api/admin/audit-logs", params={"object_id": str(uid)}).json()
    assert [i["action"] for i in logs["items"]] == ["user.suspended", "user.activated"]  # newest first
    assert logs["total"] == 2 and logs["next_offset"] is None
    one = admin_c.get("/api/admin/audit-logs", params={"object_id": str(uid), "limit": 1}).json()
    assert len(one["items"]) == 1 and one["next_offset"] == 1
    only = admin_c.get("/api/admin/audit-logs", params={"action": "user.activated", "object_id": str(uid)}).json()
    assert [i["action"] for i in only["items"]] == ["user.activated"]
    prefix = admin_c.get("/api/admin/audit-logs", params={"action": "user.", "object_id": str(uid)}).json()
    assert prefix["total"] == 2


def test_reject_pending_signup(admin_c, org):
    uid = org["unverified"].user_id
    r = admin_c.post(f"/api/admin/users/{uid}/reject")
    assert r.status_code == 200 and r.json()["user"]["status"] == "deleted"
    r = admin_c.post(f"/api/admin/users/{uid}/activate")
    assert r.status_code == 409 and r.json()["error"] == "CONFLICT"
    r = admin_c.post(f"/api/admin/users/{org['member'].user_id}/reject")
    assert r.status_code == 409  # only pending sign-ups are rejected


def test_admin_cannot_reach_other_tenants(admin_c, org):
    for action in ("activate", "suspend", "reject", "resend-verification"):
        r = admin_c.post(f"/api/admin/users/{org['outsider'].user_id}/{action}")
        assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND", action
    r = admin_c.post(f"/api/admin/users/{uuid.uuid4()}/activate")
    assert r.status_code == 404
    r = admin_c.post("/api/admin/users/not-a-uuid/activate")
    assert r.status_code == 422


def test_admin_cannot_suspend_self_or_system_admin(http, admin_c, org, committed):
    r = admin_c.post(f"/api/admin/users/{org['admin'].user_id}/suspend")
    assert r.status_code == 403 and r.json()["error"] == "PERMISSION_DENIED"
    sysadmin = make_login_user(committed, org["tenant"], role="system_admin")
    r = admin_c.post(f"/api/admin/users/{sysadmin.user_id}/suspend")
    assert r.status_code == 403 and r.json()["error"] == "PERMISSION_DENIED"
    # a system admin can act on any tenant's user
    with login(http, sysadmin.email) as sc:
        r = sc.post(f"/api/admin/users/{org['outsider'].user_id}/suspend")
        assert r.status_code == 200 and r.json()["user"]["status"] == "suspended"
        users = sc.get("/api/admin/users", params={"tenant_id": str(org["other"].id)}).json()
        assert [u["email"] for u in users["items"]] == [org["outsider"].email]
        logs = sc.get("/api/admin/audit-logs", params={"object_id": str(org["outsider"].user_id)}).json()
        assert logs["items"][0]["tenant_id"] == str(org["other"].id)  # audited under the user's tenant


def test_resend_verification(admin_c, org, test_home):
    acct = org["unverified"]
    r = admin_c.post(f"/api/admin/users/{acct.user_id}/resend-verification")
    assert r.status_code == 202, r.text
    assert len(outbox_messages(test_home, acct.email)) == 1
    token = mailed_token(test_home, acct.email)
    r = admin_c.post(f"/api/admin/users/{org['member'].user_id}/resend-verification")
    assert r.status_code == 409 and r.json()["error"] == "CONFLICT"
    logs = admin_c.get(
        "/api/admin/audit-logs", params={"action": "user.verification_resent", "object_id": str(acct.user_id)}
    ).json()
    assert logs["total"] == 1
    assert token  # the mailed link carries a fresh token


def test_tenant_admin_edits_own_tenant_settings(admin_c, org, committed):
    tid = str(org["tenant"].id)
    r = admin_c.get("/api/admin/auth-settings")
    assert r.status_code == 200
    assert r.json()["tenant_id"] == tid and r.json()["source"] == "instance"

    r = admin_c.put(
        "/api/admin/auth-settings",
        json={"allowed_email_domains": ["Corp.Example", "corp.example"], "invite_required": True},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["source"] == "tenant" and body["allowed_email_domains"] == ["corp.example"]
    assert body["invite_required"] is True
    assert admin_c.get("/api/admin/auth-settings").json()["invite_required"] is True

    logs = admin_c.get("/api/admin/audit-logs", params={"action": "auth_settings.updated"}).json()
    meta = logs["items"][0]["metadata"]
    assert meta["before"]["invite_required"] is False and meta["after"]["invite_required"] is True

    # a tenant admin can't touch the instance default or another tenant
    r = admin_c.get("/api/admin/auth-settings", params={"tenant_id": str(org["other"].id)})
    assert r.status_code == 404
    r = admin_c.put("/api/admin/auth-settings", params={"tenant_id": str(org["other"].id)}, json={})
    assert r.status_code == 404

    assert admin_c.delete("/api/admin/auth-settings", params={"tenant_id": tid}).status_code == 204
    assert admin_c.get("/api/admin/auth-settings").json()["source"] == "instance"


def test_only_a_system_admin_decides_whether_the_first_sign_up_becomes_system_admin(admin_c, org):
    """``first_user_becomes_admin`` hands out system_admin, a role above a tenant_admin's: a
    tenant_admin may not turn it on (or off) in their tenant's override (docs/accounts.md), while
    sending it unchanged, as a settings form does with every field, stays accepted."""
    current = admin_c.get("/api/admin/auth-settings").json()
    for value in (True, False):
        if value == current["first_user_becomes_admin"]:
            continue
        r = admin_c.put("/api/admin/auth-settings", json={"first_user_becomes_admin": value})
        assert r.status_code == 403 and r.json()["error"] == "PERMISSION_DENIED", r.text
    assert admin_c.get("/api/admin/auth-settings").json() == current  # nothing written, no override made
    whole = {k: current[k] for k in ("first_user_becomes_admin", "invite_required", "registration_enabled")}
    r = admin_c.put("/api/admin/auth-settings", json={**whole, "invite_required": not current["invite_required"]})
    assert r.status_code == 200, r.text
    assert admin_c.delete("/api/admin/auth-settings", params={"tenant_id": str(org["tenant"].id)}).status_code == 204


@pytest.mark.parametrize(
    "body",
    [
        {"default_signup_status": "suspended"},
        {"registration_enabled": "maybe"},
        {"allowed_email_domains": ["not a domain"]},
        {"allowed_email_domains": [""]},
        {"no_such_setting": True},
    ],
)
def test_bad_settings_are_422(admin_c, body):
    r = admin_c.put("/api/admin/auth-settings", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "VALIDATION_ERROR"


def test_system_admin_edits_instance_default(http, committed, org):
    sysadmin = make_login_user(committed, org["tenant"], role="system_admin")
    with login(http, sysadmin.email) as c:
        before = c.get("/api/admin/auth-settings").json()
        assert before["tenant_id"] is None and before["source"] == "instance"
        try:
            r = c.put(
                "/api/admin/auth-settings", json={"invited_user_auto_active": not before["invited_user_auto_active"]}
            )
            assert r.status_code == 200 and r.json()["tenant_id"] is None
            assert r.json()["invited_user_auto_active"] is (not before["invited_user_auto_active"])
            # a tenant without override sees the instance value
            other = c.get("/api/admin/auth-settings", params={"tenant_id": str(org["other"].id)}).json()
            assert other["source"] == "instance"
            assert other["invited_user_auto_active"] is (not before["invited_user_auto_active"])
        finally:
            restore = {k: before[k] for k in before if k not in ("tenant_id", "source")}
            assert c.put("/api/admin/auth-settings", json=restore).status_code == 200
        logs = c.get("/api/admin/audit-logs", params={"action": "auth_settings.updated", "limit": 2}).json()
        assert all(i["tenant_id"] is None for i in logs["items"])  # instance-level rows
    # the instance-level rows are not shown to tenant admins
    with login(http, org["admin"].email) as ac:
        logs = ac.get("/api/admin/audit-logs", params={"action": "auth_settings.updated"}).json()
        assert all(i["tenant_id"] == str(org["tenant"].id) for i in logs["items"])


def test_tenant_admin_token_reads_own_tenant_settings(live_server, committed, org):
    _, token = make_user_with_pat(committed, org["tenant"], role="tenant_admin", scopes=["admin"])
    with bearer_client(live_server, token) as b:
        got = b.get("/api/admin/auth-settings").json()
        assert got["tenant_id"] == str(org["tenant"].id)  # their tenant, not the instance row


def test_audit_log_limits(admin_c):
    assert admin_c.get("/api/admin/audit-logs", params={"limit": 0}).status_code == 422
    assert admin_c.get("/api/admin/audit-logs", params={"limit": 10_000}).status_code == 422
    assert admin_c.get("/api/admin/audit-logs", params={"object_id": "nope"}).status_code == 422


def test_admin_role_grants_no_content_read(http, live_server, committed, org):
    """docs/permissions.md#administrators: tenant_admin/system_admin administer users, not content. A private knowledge
    base in the admin's own tenant stays invisible (404) to them, by session and by admin token."""
    from openkb.models import User
    from tests.factories import make_doc, make_kb, make_workspace

    with committed() as s:
        owner = s.get(User, org["member"].user_id)
        ws = make_workspace(s, org["tenant"], owner)
        kb = make_kb(s, ws, owner, visibility="private")
        doc = make_doc(s, kb, owner)
        s.commit()
    sysadmin = make_login_user(committed, org["tenant"], role="system_admin")
    _, token = make_user_with_pat(
        committed, org["tenant"], role="tenant_admin", scopes=list(("kb:read", "kb:search", "doc:read", "admin"))
    )
    with (
        login(http, org["admin"].email) as ac,
        login(http, sysadmin.email) as sc,
        bearer_client(live_server, token) as bc,
    ):
        for c in (ac, sc, bc):
            assert c.get(f"/api/documents/{doc.id}").status_code == 404
            assert c.get(f"/api/knowledge-bases/{kb.id}").status_code == 404
    with login(http, org["member"].email) as mc:
        assert mc.get(f"/api/documents/{doc.id}").status_code == 200  # the owner does see it
