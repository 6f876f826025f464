"""Registration over HTTP for every auth_settings combination that changes the outcome.

Each test gives the default tenant (which self-registration joins) its own auth_settings
override for the duration of the test and restores it afterwards; the instance default row is
not touched, so tests don't leak settings into each other.
"""

from __future__ import annotations

import pytest
from sqlmodel import select

from openkb.models import AuditLog, TenantMembership, User
from tests.api.helpers import (
    PASSWORD,
    auth_settings_override,
    login,
    mailed_token,
    make_login_user,
    outbox_messages,
    register_user,
    unique_email,
)


def _login_status(http, email, password=PASSWORD):
    r = http.post("/api/auth/login", json={"email": email, "password": password})
    return r.status_code, r.json().get("error") if r.status_code != 200 else None


def test_verification_required_then_active(http, committed, test_home):
    with auth_settings_override(committed, email_verification_required=True, default_signup_status="active"):
        a = register_user(http, display_name="Ada")
        body = a.response.json()
        assert body["user"]["status"] == "pending_email_verification"
        assert body["user"]["display_name"] == "Ada"
        assert body["verification_required"] is True
        assert "password" not in a.response.text and "hash" not in a.response.text
        assert _login_status(http, a.email) == (403, "EMAIL_NOT_VERIFIED")

        token = mailed_token(test_home, a.email, "/verify-email")
        msg = outbox_messages(test_home, a.email)[-1]
        assert "http://127.0.0.1:8000/verify-email?token=" in msg.get_content()
        r = http.post("/api/auth/verify-email", json={"token": token})
        assert r.status_code == 200, r.text
        assert r.json()["user"]["status"] == "active"
        assert r.json()["user"]["email_verified_at"] is not None

        # the link is single-use
        r = http.post("/api/auth/verify-email", json={"token": token})
        assert r.status_code == 400 and r.json()["error"] == "INVALID_TOKEN"
        with login(http, a.email) as c:
            assert c.get("/api/auth/me").json()["user"]["email"] == a.email

    with committed() as s:
        actions = {row.action for row in s.exec(select(AuditLog).where(AuditLog.object_id == a.user_id))}
    assert {"user.registered", "user.email_verified", "auth.login"} <= actions


def test_verification_off_default_active(http, committed, test_home):
    with auth_settings_override(committed, email_verification_required=False, default_signup_status="active"):
        a = register_user(http)
        assert a.status == "active"
        assert a.response.json()["verification_required"] is False
        assert a.response.json()["user"]["email_verified_at"] is None
        assert outbox_messages(test_home, a.email) == []
        assert _login_status(http, a.email) == (200, None)


def test_default_pending_activation_needs_admin(http, committed):
    admin = make_login_user(committed, role="tenant_admin")
    with auth_settings_override(
        committed, email_verification_required=False, default_signup_status="pending_activation"
    ):
        a = register_user(http)
        assert a.status == "pending_activation"
        assert _login_status(http, a.email) == (403, "ACCOUNT_PENDING_ACTIVATION")
        with login(http, admin.email) as ac:
            pending = ac.get("/api/admin/users", params={"status": "pending_activation", "q": a.email}).json()
            assert [u["email"] for u in pending["items"]] == [a.email]
            r = ac.post(f"/api/admin/users/{a.user_id}/activate")
            assert r.status_code == 200 and r.json()["user"]["status"] == "active"
        assert _login_status(http, a.email) == (200, None)


def test_verification_then_pending_activation(http, committed, test_home):
    with auth_settings_override(
        committed, email_verification_required=True, default_signup_status="pending_activation"
    ):
        a = register_user(http)
        assert a.status == "pending_email_verification"
        r = http.post("/api/auth/verify-email", json={"token": mailed_token(test_home, a.email)})
        assert r.status_code == 200
        assert r.json()["user"]["status"] == "pending_activation"
        assert _login_status(http, a.email) == (403, "ACCOUNT_PENDING_ACTIVATION")


def test_registration_disabled(http, committed):
    with auth_settings_override(committed, registration_enabled=False):
        a = register_user(http, expect=403)
        assert a.response.json()["error"] == "REGISTRATION_DISABLED"
    with committed() as s:
        assert s.exec(select(User).where(User.email == a.email)).first() is None


def test_invite_required(http, committed):
    with auth_settings_override(committed, invite_required=True):
        a = register_user(http, expect=403)
        assert a.response.json()["error"] == "REGISTRATION_INVITE_REQUIRED"
        bad = register_user(http, expect=400, invitation_token="kbinvite_not-a-real-invitation")
        assert bad.response.json()["error"] == "INVALID_TOKEN"


def test_allowed_email_domains(http, committed):
    with auth_settings_override(committed, allowed_email_domains=["corp.example"]):
        a = register_user(http, unique_email(domain="gmail.example"), expect=422)
        assert a.response.json()["error"] == "EMAIL_DOMAIN_NOT_ALLOWED"
        ok = register_user(http, unique_email(domain="CORP.example"))
        assert ok.status == "active"
        # a look-alike subdomain is not the domain
        sub = register_user(http, unique_email(domain="evil.corp.example.net"), expect=422)
        assert sub.response.json()["error"] == "EMAIL_DOMAIN_NOT_ALLOWED"


def _shape(body):
    """What a client can compare between two answers (values that differ per call removed)."""
    user = {k: v for k, v in body["user"].items() if k not in ("id", "created_at", "email", "display_name")}
    return {**body, "user": user}


def test_taken_address_answers_like_a_new_one(http, committed, test_home):
    """No account enumeration (issue 10 §7): it used to be 409 "a user with email X already exists"."""
    with auth_settings_override(committed, email_verification_required=True):
        first = register_user(http, display_name="Owner")
        again = register_user(http, first.email.upper(), password="another password 123", display_name="Mallory")
        new = register_user(http, display_name="Someone")
        a, b, c = (x.response.json() for x in (first, again, new))
        assert again.response.status_code == new.response.status_code == 201
        assert _shape(b) == _shape(c) == _shape(a)
        assert b["user"]["status"] == "pending_email_verification" and b["verification_required"] is True
        assert b["user"]["email"] == first.email.lower() and b["user"]["display_name"] == "Mallory"
        assert b["user"]["id"] != a["user"]["id"]
        assert set(again.response.headers) - {"date", "x-request-id", "content-length"} == set(new.response.headers) - {
            "date",
            "x-request-id",
            "content-length",
        }
        with committed() as s:
            rows = s.exec(select(User).where(User.email == first.email.lower())).all()
            assert [u.id for u in rows] == [first.user_id]  # nothing created, nothing changed
            assert rows[0].display_name == "Owner"
            assert s.get(User, b["user"]["id"]) is None
        # the owner, still unverified, gets a fresh verification link; the first password stays
        msgs = outbox_messages(test_home, first.email)
        assert len(msgs) == 2 and all("/verify-email?token=" in m.get_content() for m in msgs)
        r = http.post("/api/auth/verify-email", json={"token": mailed_token(test_home, first.email)})
        assert r.status_code == 200, r.text
        assert _login_status(http, first.email) == (200, None)
        assert _login_status(http, first.email, "another password 123") == (401, "INVALID_CREDENTIALS")

        # an active account's owner is told someone tried
        register_user(http, first.email, password="yet another password")
        last = outbox_messages(test_home, first.email)[-1]
        assert last["Subject"] == "Someone tried to register with your address"
        assert "already has an account" in last.get_content() and "token=" not in last.get_content()
    with committed() as s:
        audit = s.exec(
            select(AuditLog).where(
                AuditLog.action == "user.registration_address_taken", AuditLog.object_id == first.user_id
            )
        ).all()
    assert len(audit) == 2 and {row.meta["mailed"] for row in audit} == {True}
    assert {(row.actor_user_id, row.meta["actor_kind"]) for row in audit} == {(None, "anonymous")}


def test_taken_address_mails_are_throttled(http, committed, test_home):
    """The form can't be used to flood someone's mailbox; the answer stays the same."""
    owner = make_login_user(committed)
    with auth_settings_override(committed, email_verification_required=True):
        answers = {register_user(http, owner.email).response.status_code for _ in range(7)}
    assert answers == {201}
    assert len(outbox_messages(test_home, owner.email)) == 5
    with committed() as s:
        audit = s.exec(
            select(AuditLog).where(
                AuditLog.action == "user.registration_address_taken", AuditLog.object_id == owner.user_id
            )
        ).all()
    assert sorted(row.meta["mailed"] for row in audit) == [False, False, True, True, True, True, True]


def test_taken_address_without_verification(http, committed):
    """Verification off: same status and shape, but nothing can hide that the new password
    doesn't sign in (documented in openkb/accounts/registration.py)."""
    owner = make_login_user(committed)
    with auth_settings_override(committed, email_verification_required=False, default_signup_status="active"):
        taken = register_user(http, owner.email, password="not the owner's password")
        new = register_user(http)
    assert _shape(taken.response.json()) == _shape(new.response.json())
    assert taken.status == new.status == "active"
    assert _login_status(http, owner.email) == (200, None)
    assert _login_status(http, owner.email, "not the owner's password") == (401, "INVALID_CREDENTIALS")


def test_instance_default_applies_without_override(http, committed):
    """No tenant override: the instance row decides (its default requires verification)."""
    from openkb.accounts import auth_settings as svc

    with committed() as s:
        from openkb.bootstrap import default_tenant

        t = default_tenant(s)
        assert svc.tenant_row(s, t.id) is None
        inst = svc.instance_row(s)
        s.commit()
        expected = "pending_email_verification" if inst.email_verification_required else None
    if expected is None:
        pytest.skip("the instance default was changed by the operator")
    a = register_user(http)
    assert a.status == expected


@pytest.mark.parametrize(
    "body, field",
    [
        ({"email": "x@example.com", "password": "short"}, "password"),
        ({"email": "not-an-email", "password": PASSWORD}, "email"),
        ({"email": "a" * 330 + "@example.com", "password": PASSWORD}, "email"),
        ({"email": "x@example.com", "password": "p" * 1025}, "password"),
        ({"email": "x@example.com", "password": "password1"}, "password"),  # among the most common
        ({"email": "x@example.com", "password": "qwertyuiop"}, "password"),  # a keyboard row
        ({"email": "jane.doe@example.com", "password": "janedoe2024"}, "password"),  # the address itself
        ({"email": "x@example.com", "password": "a" * 100}, "password"),  # one character repeated
        ({"email": "x@example.com", "password": PASSWORD, "display_name": "n" * 1001}, "display_name"),
        ({"email": "x@example.com", "password": PASSWORD, "display_name": ""}, "display_name"),
        ({"password": PASSWORD}, "email"),
        ({"email": "x@example.com"}, "password"),
    ],
)
def test_bad_input_is_422(http, committed, body, field):
    with auth_settings_override(committed):
        r = http.post("/api/auth/register", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "VALIDATION_ERROR"
    assert field in r.json()["detail"]


def test_non_json_body_is_400_invalid_json(http):
    r = http.post("/api/auth/register", content=b"\xff\xfe", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "INVALID_JSON"
    assert r.json()["detail"].startswith("line 1, column 1: ")


def test_first_user_becomes_admin_over_http(http, committed):
    """With no system_admin in the instance, the first to complete registration gets the role.

    The shared test database may already have system admins: they are demoted for the length of
    the test and restored in ``finally``.
    """
    with committed() as s:
        demoted = list(s.exec(select(TenantMembership).where(TenantMembership.role == "system_admin")))
        ids = [m.id for m in demoted]
        for m in demoted:
            m.role = "tenant_admin"
            s.add(m)
        s.commit()
    created: list = []
    try:
        with auth_settings_override(
            committed, first_user_becomes_admin=True, default_signup_status="pending_activation"
        ):
            first = register_user(http)
            created.append(first.user_id)
            # the first admin is active even though sign-ups otherwise wait for activation
            assert first.status == "active"
            second = register_user(http)
            created.append(second.user_id)
            assert second.status == "pending_activation"
            with login(http, first.email) as c:
                roles = c.get("/api/auth/me").json()["tenant_roles"]
                assert [r["role"] for r in roles] == ["system_admin"]
                assert c.get("/api/admin/users", params={"limit": 1}).status_code == 200
    finally:
        with committed() as s:
            for uid in created:
                if uid is None:
                    continue
                for m in s.exec(select(TenantMembership).where(TenantMembership.user_id == uid)):
                    m.role = "member"
                    s.add(m)
            for m in s.exec(select(TenantMembership).where(TenantMembership.id.in_(ids))):  # type: ignore[attr-defined]
                m.role = "system_admin"
                s.add(m)
            s.commit()


def test_nul_characters_are_422_not_500(http, committed):
    """PostgreSQL text can't store NUL; inputs carrying one are refused as validation errors."""
    with auth_settings_override(committed):
        for path, body in [
            ("/api/auth/register", {"email": "a\x00b@example.com", "password": PASSWORD}),
            ("/api/auth/register", {"email": unique_email(), "password": PASSWORD, "display_name": "n\x00m"}),
            ("/api/auth/login", {"email": "a\x00b@example.com", "password": PASSWORD}),
            ("/api/auth/password-reset/request", {"email": "a\x00b@example.com"}),
            ("/api/auth/verify-email", {"token": "t\x00"}),
        ]:
            r = http.post(path, json=body)
            assert r.status_code == 422, (path, r.status_code, r.text)
            assert r.json()["error"] == "VALIDATION_ERROR"
    a = make_login_user(committed, role="tenant_admin")
    with login(http, a.email) as c:
        assert c.get("/api/admin/users", params={"q": "a\x00"}).status_code == 422
        assert c.get("/api/admin/audit-logs", params={"action": "a\x00"}).status_code == 422
        assert c.post("/api/me/tokens", json={"name": "a\x00", "scopes": ["kb:read"]}).status_code == 422
        r = c.put("/api/admin/auth-settings", json={"allowed_email_domains": ["a\x00.example"]})
        assert r.status_code == 422


def test_login_with_malformed_email_is_invalid_credentials(http):
    r = http.post("/api/auth/login", json={"email": "no-at-sign", "password": PASSWORD})
    assert r.status_code == 401 and r.json()["error"] == "INVALID_CREDENTIALS"
