"""Self-registration and email verification (docs/accounts.md#registration).

    register -> pending_email_verification (if verification is required) -> verify link
             -> pending_activation (default_signup_status, or invited + not auto-active)
             -> active

The first user to *complete* registration (at verification when verification is required)
becomes ``system_admin`` when no system_admin exists and ``first_user_becomes_admin`` is on. That
decision runs under a transaction-scoped advisory lock so two simultaneous sign-ups can't both
become the first admin. The first admin is always made active: nobody could activate them.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from openkb.accounts import auth_settings, email_tokens
from openkb.accounts.errors import (
    EmailDomainNotAllowed, InvalidToken, RegistrationDisabled, RegistrationInviteRequired,
)
from openkb.accounts.users import check_password, create_user, has_system_admin, normalize_email
from openkb.audit import record_audit
from openkb.errors import AlreadyExists, OpenKBError, PermissionDenied
from openkb.models import AuthSettings, Invitation, Tenant, TenantMembership, User
from openkb.models._base import utcnow
from openkb.permissions.principal import Principal

log = logging.getLogger("openkb.accounts")

_FIRST_ADMIN_LOCK = "openkb:first-system-admin"


@dataclass(frozen=True)
class Registration:
    user: User
    tenant_id: uuid.UUID
    verification_sent: bool
    became_system_admin: bool
    invitation: dict[str, Any] | None = None  # what happened to the invitation, if one was used


def status_after_verification(settings: AuthSettings, *, invited: bool) -> str:
    if invited and settings.invited_user_auto_active:
        return "active"
    return settings.default_signup_status


def _lookup_invitation(session: Session, token: str, email: str) -> Invitation:
    """The invitation a sign-up presents, checked for *this* address (a targeted invitation for
    someone else does not open invite-only registration). Granting is the invitation service's
    job (``openkb.permissions.invitations.accept_invitation``), once the account is active."""
    from openkb.security import hash_token

    inv = None
    if token and len(token) <= 200:
        inv = session.exec(select(Invitation).where(Invitation.token_hash == hash_token(token))).first()
    now = utcnow()
    if inv is None or inv.status != "pending" or (inv.expires_at is not None and inv.expires_at <= now) \
            or (inv.max_uses is not None and inv.used_count >= inv.max_uses):
        raise InvalidToken("this invitation is invalid, used up or expired")
    if inv.email is not None and inv.email.lower() != email:
        raise PermissionDenied("this invitation was sent to another email address")
    if inv.allowed_email_domains and email.rsplit("@", 1)[-1] not in {d.lower() for d in inv.allowed_email_domains}:
        raise EmailDomainNotAllowed("this invitation is not open to your email domain", field="email")
    return inv


def _accept_invitation(session: Session, user: User, tenant_id: uuid.UUID, token: str) -> dict[str, Any]:
    """Accept for a user who just became active; report what happened (never raises for the
    invitation's own reasons: the account exists either way, the invitation can be retried)."""
    from openkb.permissions.invitations import accept_invitation

    if user.status != "active":
        return {"status": "deferred", "detail": "accept the invitation once your account is active"}
    try:
        with session.begin_nested():
            result = accept_invitation(session, token, Principal.user(user, tenant_id))
    except OpenKBError as exc:
        return {"status": "failed", "error": exc.code, "detail": exc.detail}
    return {"status": result.status, "invitation_id": str(result.invitation.id),
            "object_type": result.invitation.object_type, "object_id": str(result.invitation.object_id),
            "role": result.invitation.role}


def maybe_make_first_admin(session: Session, user: User, tenant_id: uuid.UUID, settings: AuthSettings) -> bool:
    """Promote ``user`` to system_admin when the instance has none (docs/accounts.md#first-administrator). Never commits."""
    if not settings.first_user_becomes_admin:
        return False
    session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": _FIRST_ADMIN_LOCK})
    if has_system_admin(session):
        return False
    m = session.exec(select(TenantMembership).where(TenantMembership.user_id == user.id,
                                                    TenantMembership.tenant_id == tenant_id)).first()
    if m is None:
        return False
    m.role = "system_admin"
    session.add(m)
    user.status = "active"
    user.updated_at = utcnow()
    session.add(user)
    session.flush()
    log.info("first user %s became system_admin", user.email)
    return True


def register(session: Session, ctx, *, email: str, password: str, display_name: str | None,  # noqa: ANN001
             invitation_token: str | None = None, ip: str | None = None,
             user_agent: str | None = None) -> Registration:
    from openkb.bootstrap import default_tenant

    email_n = normalize_email(email)
    check_password(password)
    invitation = _lookup_invitation(session, invitation_token, email_n) if invitation_token else None
    tenant = session.get(Tenant, invitation.tenant_id) if invitation else default_tenant(session)
    assert tenant is not None
    settings = auth_settings.effective(session, tenant.id).row
    if not settings.registration_enabled:
        raise RegistrationDisabled("registration is closed on this instance")
    if settings.invite_required and invitation is None:
        raise RegistrationInviteRequired("registration needs an invitation")
    if not auth_settings.email_domain_allowed(settings, email_n):
        raise EmailDomainNotAllowed("registration is not open to this email domain", field="email")

    verify = settings.email_verification_required
    status = "pending_email_verification" if verify else status_after_verification(settings, invited=invitation is not None)
    try:
        with session.begin_nested():
            user = create_user(session, tenant=tenant, email=email_n, password=password, display_name=display_name,
                               role="member", status=status, verified=False)
    except IntegrityError:
        raise AlreadyExists("an account with this email already exists") from None

    became_admin = False
    if not verify:
        became_admin = maybe_make_first_admin(session, user, tenant.id, settings)
    actor = Principal.user(user, tenant.id)
    record_audit(session, tenant_id=tenant.id, actor=actor, action="user.registered", object_type="user",
                 object_id=user.id, ip=ip, user_agent=user_agent,
                 metadata={"status": user.status, "invited": invitation is not None,
                           "invitation_id": invitation.id if invitation else None,
                           "became_system_admin": became_admin})
    if became_admin:
        record_audit(session, tenant_id=tenant.id, actor=None, action="user.role_granted", object_type="user",
                     object_id=user.id, metadata={"role": "system_admin", "reason": "first_user_becomes_admin",
                                                  "before": {"role": "member"}, "after": {"role": "system_admin"}})
    inv_result = None
    if verify:
        # The invitation travels in the verification link and is accepted at verification.
        email_tokens.send_verification(session, ctx, user, invitation_token=invitation_token)
        if invitation_token:
            inv_result = {"status": "pending_verification"}
    elif invitation_token:
        inv_result = _accept_invitation(session, user, tenant.id, invitation_token)
    return Registration(user=user, tenant_id=tenant.id, verification_sent=verify, became_system_admin=became_admin,
                        invitation=inv_result)


def primary_tenant_id(session: Session, user_id: uuid.UUID) -> uuid.UUID | None:
    from openkb.bootstrap import DEFAULT_TENANT_SLUG

    rows = session.exec(
        select(TenantMembership.tenant_id, Tenant.slug)  # type: ignore[call-overload]
        .join(Tenant, Tenant.id == TenantMembership.tenant_id)
        .where(TenantMembership.user_id == user_id).order_by(TenantMembership.created_at)
    ).all()
    for tid, slug in rows:
        if slug == DEFAULT_TENANT_SLUG:
            return tid  # type: ignore[no-any-return]
    return rows[0][0] if rows else None


@dataclass(frozen=True)
class Verification:
    user: User
    became_system_admin: bool
    invitation: dict[str, Any] | None = None


def verify_email(session: Session, ctx, token: str, *, invitation_token: str | None = None,  # noqa: ANN001
                 ip: str | None = None, user_agent: str | None = None) -> Verification:
    """Consume a verification token; accept the invitation the link carries, if any.

    Only a ``pending_email_verification`` user changes status: verifying never re-activates a
    suspended account. An invitation that no longer works (revoked meanwhile) doesn't fail the
    verification; the user just isn't treated as invited.
    """
    et = email_tokens.consume(session, token, "verify_email")
    user = session.exec(select(User).where(User.id == et.user_id).with_for_update()).one()
    before = user.status
    if user.email_verified_at is None:
        user.email_verified_at = utcnow()
    became_admin = False
    tenant_id = primary_tenant_id(session, user.id)
    invited = False
    if invitation_token:
        try:
            _lookup_invitation(session, invitation_token, user.email)
            invited = True
        except OpenKBError:
            invitation_token = None
    if user.status == "pending_email_verification" and tenant_id is not None:
        settings = auth_settings.effective(session, tenant_id).row
        user.status = status_after_verification(settings, invited=invited)
        user.updated_at = utcnow()
        session.add(user)
        session.flush()
        became_admin = maybe_make_first_admin(session, user, tenant_id, settings)
    session.add(user)
    session.flush()
    record_audit(session, tenant_id=tenant_id, actor=Principal.user(user, tenant_id) if tenant_id else None,
                 action="user.email_verified", object_type="user", object_id=user.id, ip=ip, user_agent=user_agent,
                 metadata={"before": {"status": before}, "after": {"status": user.status},
                           "became_system_admin": became_admin})
    if became_admin:
        record_audit(session, tenant_id=tenant_id, actor=None, action="user.role_granted", object_type="user",
                     object_id=user.id, metadata={"role": "system_admin", "reason": "first_user_becomes_admin",
                                                  "before": {"role": "member"}, "after": {"role": "system_admin"}})
    inv_result = _accept_invitation(session, user, tenant_id, invitation_token) \
        if invitation_token and tenant_id is not None else None
    return Verification(user=user, became_system_admin=became_admin, invitation=inv_result)
