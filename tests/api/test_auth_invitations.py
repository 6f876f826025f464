"""Registration through an invitation (docs/accounts.md#invitations-and-registration): invite-only, auto-active, verification link."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from sqlmodel import select

from openkb.models import WorkspaceMember
from openkb.permissions.invitations import create_invitation
from openkb.permissions.principal import Principal
from tests.api.helpers import (
    auth_settings_override,
    login,
    make_login_user,
    outbox_messages,
    register_user,
    unique_email,
)
from tests.factories import make_tenant, make_workspace


@pytest.fixture()
def invite(committed):
    """A fresh tenant with a workspace; ``invite(email=None, **kw)`` returns an invitation token."""
    with committed() as s:
        t = make_tenant(s)
        s.commit()
    owner = make_login_user(committed, t)
    with committed() as s:
        from openkb.models import User

        ws = make_workspace(s, t, s.get(User, owner.user_id))
        s.commit()

    def make(email=None, **kw):
        with committed() as s:
            created = create_invitation(s, Principal.user(owner.user_id, t.id), ws, role="member", email=email, **kw)
            s.commit()
            return created.token

    make.tenant = t
    make.workspace = ws
    return make


def _ws_role(committed, ws, user_id):
    with committed() as s:
        return s.exec(
            select(WorkspaceMember.role).where(
                WorkspaceMember.workspace_id == ws.id, WorkspaceMember.user_id == user_id
            )
        ).first()


def test_invite_only_with_invitation_is_accepted(http, committed, invite):
    with (
        auth_settings_override(committed, invite_required=True),
        auth_settings_override(
            committed,
            invite.tenant,
            invite_required=True,
            default_signup_status="pending_activation",
            invited_user_auto_active=True,
        ),
    ):
        # without an invitation, sign-up targets the default tenant, which is invite-only too
        assert register_user(http, expect=403).response.json()["error"] == "REGISTRATION_INVITE_REQUIRED"
        a = register_user(http, invitation_token=invite())
    assert a.status == "active"  # invited + auto-active beats pending_activation
    assert a.response.json()["invitation"]["status"] == "accepted"
    assert _ws_role(committed, invite.workspace, a.user_id) == "member"
    with login(http, a.email) as c:
        roles = c.get("/api/auth/me").json()["tenant_roles"]
    assert [(r["tenant_slug"], r["role"]) for r in roles] == [(invite.tenant.slug, "member")]


def test_invited_without_auto_active_waits(http, committed, invite):
    with auth_settings_override(
        committed, invite.tenant, default_signup_status="pending_activation", invited_user_auto_active=False
    ):
        a = register_user(http, invitation_token=invite())
    assert a.status == "pending_activation"
    assert a.response.json()["invitation"]["status"] == "deferred"
    assert _ws_role(committed, invite.workspace, a.user_id) is None


def test_invitation_travels_through_verification(http, committed, invite, test_home):
    with auth_settings_override(
        committed, invite.tenant, email_verification_required=True, default_signup_status="pending_activation"
    ):
        email = unique_email()
        a = register_user(http, email, invitation_token=invite(email=email))
        assert a.status == "pending_email_verification"
        assert a.response.json()["invitation"]["status"] == "pending_verification"
        assert _ws_role(committed, invite.workspace, a.user_id) is None
        body = outbox_messages(test_home, email)[-1].get_content()
        url = next(w for w in body.split() if "/verify-email?" in w)
        q = parse_qs(urlparse(url).query)
        r = http.post("/api/auth/verify-email", json={"token": q["token"][0], "invitation_token": q["invitation"][0]})
    assert r.status_code == 200, r.text
    assert r.json()["user"]["status"] == "active"
    assert r.json()["invitation"]["status"] == "accepted"
    assert _ws_role(committed, invite.workspace, a.user_id) == "member"


def test_invitation_for_someone_else_is_refused(http, committed, invite):
    with auth_settings_override(committed, invite.tenant, invite_required=True):
        a = register_user(http, expect=403, invitation_token=invite(email=unique_email()))
    assert a.response.json()["error"] == "PERMISSION_DENIED"


def test_invitation_domain_rule(http, committed, invite):
    with auth_settings_override(committed, invite.tenant):
        token = invite(allowed_email_domains=["partner.example"])
        bad = register_user(http, unique_email(domain="other.example"), expect=422, invitation_token=token)
        assert bad.response.json()["error"] == "EMAIL_DOMAIN_NOT_ALLOWED"
        ok = register_user(http, unique_email(domain="partner.example"), invitation_token=token)
        assert ok.response.json()["invitation"]["status"] == "accepted"
