"""Self-registration and email verification (docs/06 §4, §6, §7).

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

from sqlalchemy import exists, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from openkb.accounts import auth_settings, email_tokens
from openkb.accounts.errors import (
    EmailDomainNotAllowed, InvalidToken, RegistrationDisabled, RegistrationInviteRequired,
)
from openkb.accounts.users import check_password, create_user, has_system_admin, normalize_email
from openkb.audit import record_audit
from openkb.errors import AlreadyExists
from openkb.models import AuthSettings, Invitation, InvitationAcceptance, Tenant, TenantMembership, User
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
    invitation: dict | None = None  # what the invitation service reported, if one was used


def status_after_verification(settings: AuthSettings, *, invited: bool) -> str:
    if invited and settings.invited_user_auto_active:
        return "active"
    return settings.default_signup_status


def _lookup_invitation(session: Session, token: str) -> Invitation:
    """The invitation a sign-up presents; only to learn its tenant and that it is usable.
    Accepting it (roles, approval, per-link domain rules) is the invitation service's job."""
    from openkb.security import hash_token

    inv = None
    if token and len(token) <= 200:
        inv = session.exec(select(Invitation).where(Invitation.token_hash == hash_token(token))).first()
    now = utcnow()
    if inv is None or inv.status not in ("pending",) or (inv.expires_at is not None and inv.expires_at <= now) \
            or (inv.max_uses is not None and inv.used_count >= inv.max_uses):
        raise InvalidToken("this invitation is invalid, used up or expired")
    return inv


def _accept_invitation(session: Session, user: User, tenant_id: uuid.UUID, token: str,
                       ip: str | None, user_agent: str | None) -> dict:
    from openkb.permissions import invitations

    result = invitations.accept(session, Principal.user(user, tenant_id), token, ip=ip, user_agent=user_agent)
    status = getattr(result, "status", None) or (result.get("status") if isinstance(result, dict) else None)
    return {"status": status or "accepted"}


def _was_invited(session: Session, user_id: uuid.UUID) -> bool:
    return bool(session.exec(select(exists().where(InvitationAcceptance.user_id == user_id))).one())


def maybe_make_first_admin(session: Session, user: User, tenant_id: uuid.UUID, settings: AuthSettings) -> bool:
    """Promote ``user`` to system_admin when the instance has none (docs/06 §7). Never commits."""
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
    invitation = _lookup_invitation(session, invitation_token) if invitation_token else None
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

    inv_result = None
    if invitation_token:
        inv_result = _accept_invitation(session, user, tenant.id, invitation_token, ip, user_agent)
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
    if verify:
        email_tokens.send_verification(session, ctx, user)
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


def verify_email(session: Session, ctx, token: str, *, ip: str | None = None,  # noqa: ANN001
                 user_agent: str | None = None) -> tuple[User, bool]:
    """Consume a verification token. Returns (user, became_system_admin).

    Only a ``pending_email_verification`` user changes status: verifying never re-activates a
    suspended account.
    """
    et = email_tokens.consume(session, token, "verify_email")
    user = session.exec(select(User).where(User.id == et.user_id).with_for_update()).one()
    before = user.status
    if user.email_verified_at is None:
        user.email_verified_at = utcnow()
    became_admin = False
    tenant_id = primary_tenant_id(session, user.id)
    if user.status == "pending_email_verification" and tenant_id is not None:
        settings = auth_settings.effective(session, tenant_id).row
        user.status = status_after_verification(settings, invited=_was_invited(session, user.id))
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
    return user, became_admin
