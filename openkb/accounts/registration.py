"""Self-registration and email verification (docs/accounts.md#registration).

    register -> pending_email_verification (if verification is required) -> verify link
             -> pending_activation (default_signup_status, or invited + not auto-active)
             -> active

The first user to *complete* registration (at verification when verification is required)
becomes ``system_admin`` when no system_admin exists and ``first_user_becomes_admin`` is on. That
decision runs under a transaction-scoped advisory lock so two simultaneous sign-ups can't both
become the first admin. The first admin is always made active: nobody could activate them.

Registration does not reveal whether an address has an account (docs/accounts.md#registration),
just as login and password reset don't: an address that is taken gets the answer a new one would
get, with a stand-in user that is never stored, and the owner of the address gets a mail saying
someone tried. Both paths hash the password and queue one mail, so they also take about as
long. Trap: with ``email_verification_required`` off, a new account can sign in at once and a
stand-in can't, so whoever tries to sign in afterwards learns the difference; only verification
by mail closes that (it is the instance default).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from openkb import ratelimit
from openkb.accounts import auth_settings, email_tokens
from openkb.accounts.users import check_password, create_user, has_system_admin, normalize_email
from openkb.audit import record_audit
from openkb.errors import (
    AlreadyExists,
    EmailDomainNotAllowed,
    InvalidToken,
    OpenKBError,
    PermissionDenied,
    RegistrationDisabled,
    RegistrationInviteRequired,
    ValidationError,
)
from openkb.models import AuthSettings, Document, Invitation, Tenant, TenantMembership, User
from openkb.models._base import utcnow
from openkb.permissions.principal import Principal

log = logging.getLogger("openkb.accounts")

_FIRST_ADMIN_LOCK = "openkb:first-system-admin"


_TAKEN_MAILS_PER_HOUR = 5  # "someone tried to register with your address" mails per address


@dataclass(frozen=True)
class Registration:
    """What a sign-up answers. For an address that already had an account, ``user`` is a
    stand-in (random id, never stored) shaped like the new account would have been, and
    ``address_taken`` is True: adapters must not show that flag (nor anything else that differs)."""

    user: User
    tenant_id: uuid.UUID
    verification_sent: bool
    became_system_admin: bool
    invitation: dict[str, Any] | None = None  # what happened to the invitation, if one was used
    address_taken: bool = False
    # the link went to the server's outbox folder, not to the address (no SMTP_HOST): an
    # instance-wide fact, the same for a taken address, so it tells nothing about accounts
    mail_to_outbox: bool = False


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
    if (
        inv is None
        or inv.status != "pending"
        or (inv.expires_at is not None and inv.expires_at <= now)
        or (inv.max_uses is not None and inv.used_count >= inv.max_uses)
    ):
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
    out = {
        "status": result.status,
        "invitation_id": str(result.invitation.id),
        "object_type": result.invitation.object_type,
        "object_id": str(result.invitation.object_id),
        "role": result.invitation.role,
    }
    if result.invitation.object_type == "document" and result.status == "accepted":
        # where the page lives, so the web app can lead there after sign-in (a page's address
        # names its knowledge base); an accepted invitation made it readable to this user
        doc = session.get(Document, result.invitation.object_id)
        if doc is not None:
            out["knowledge_base_id"] = str(doc.knowledge_base_id)
    return out


def grant_first_admin(
    session: Session, user: User, tenant_id: uuid.UUID, *, reason: str, actor: Principal | None = None
) -> bool:
    """Make ``user`` the instance's ``system_admin`` (and active: nobody else could activate
    them) when none exists, audited ``user.role_granted`` with ``reason``; False when a
    system_admin exists or ``user`` has no membership in ``tenant_id``. Never commits.

    The check runs under a transaction-scoped advisory lock, so two sign-ups completing at once
    (or a sign-up and ``openkb init``) cannot both become the first administrator."""
    session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": _FIRST_ADMIN_LOCK})
    if has_system_admin(session):
        return False
    m = session.exec(
        select(TenantMembership).where(TenantMembership.user_id == user.id, TenantMembership.tenant_id == tenant_id)
    ).first()
    if m is None:
        return False
    before = m.role
    m.role = "system_admin"
    session.add(m)
    user.status = "active"
    user.updated_at = utcnow()
    session.add(user)
    session.flush()
    record_audit(
        session,
        tenant_id=tenant_id,
        actor=actor,
        action="user.role_granted",
        object_type="user",
        object_id=user.id,
        metadata={
            "role": "system_admin",
            "reason": reason,
            "before": {"role": before},
            "after": {"role": "system_admin"},
        },
    )
    log.info("%s became system_admin (%s)", user.email, reason)
    return True


def maybe_make_first_admin(session: Session, user: User, tenant_id: uuid.UUID, settings: AuthSettings) -> bool:
    """Promote ``user`` to system_admin when the instance has none and ``first_user_becomes_admin``
    is on: the user has just completed registration, by the link or by the operator's
    activation (docs/accounts.md#first-administrator). Never commits."""
    if not settings.first_user_becomes_admin:
        return False
    return grant_first_admin(session, user, tenant_id, reason="first_user_becomes_admin")


def register(
    session: Session,
    ctx,
    *,
    email: str,
    password: str,
    display_name: str | None,  # noqa: ANN001
    invitation_token: str | None = None,
    ip: str | None = None,
    user_agent: str | None = None,
) -> Registration:
    from openkb.bootstrap import default_tenant

    email_n = normalize_email(email)
    check_password(password, email_n, display_name)
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
    status = (
        "pending_email_verification" if verify else status_after_verification(settings, invited=invitation is not None)
    )
    name = _display_name(email_n, display_name)
    existing = session.exec(select(User).where(User.email == email_n)).first()
    if existing is None:
        try:
            with session.begin_nested():
                user = create_user(
                    session,
                    tenant=tenant,
                    email=email_n,
                    password=password,
                    display_name=name,
                    role="member",
                    status=status,
                    verified=False,
                )
        except (IntegrityError, AlreadyExists):  # a simultaneous sign-up with the same address won
            existing = session.exec(select(User).where(User.email == email_n)).one()
    if existing is not None:
        return _address_taken(
            session,
            ctx,
            existing,
            tenant_id=tenant.id,
            settings=settings,
            password=password,
            display_name=name,
            status=status,
            invited=invitation is not None,
            invitation_token=invitation_token,
            ip=ip,
            user_agent=user_agent,
        )

    became_admin = False
    if not verify:
        became_admin = maybe_make_first_admin(session, user, tenant.id, settings)
    actor = Principal.user(user, tenant.id)
    record_audit(
        session,
        tenant_id=tenant.id,
        actor=actor,
        action="user.registered",
        object_type="user",
        object_id=user.id,
        ip=ip,
        user_agent=user_agent,
        metadata={
            "status": user.status,
            "invited": invitation is not None,
            "invitation_id": invitation.id if invitation else None,
            "became_system_admin": became_admin,
        },
    )
    inv_result = None
    if verify:
        # The invitation travels in the verification link and is accepted at verification.
        email_tokens.send_verification(session, ctx, user, invitation_token=invitation_token)
        if invitation_token:
            inv_result = {"status": "pending_verification"}
    elif invitation_token:
        inv_result = _accept_invitation(session, user, tenant.id, invitation_token)
    return Registration(
        user=user,
        tenant_id=tenant.id,
        verification_sent=verify,
        became_system_admin=became_admin,
        invitation=inv_result,
        mail_to_outbox=verify and ctx.mailer.to_outbox,
    )


def _display_name(email: str, display_name: str | None) -> str:
    """The name a new account gets (``create_user``'s rule), checked before we know whether the
    address is taken, so a bad name fails the same way on both paths."""
    name = (display_name or email.split("@")[0]).strip()
    if not name or len(name) > 1000 or "\x00" in name:
        raise ValidationError("display name must be 1-1000 characters", field="display_name")
    return name


def _address_taken(
    session: Session,
    ctx,
    existing: User,
    *,
    tenant_id: uuid.UUID,
    settings: AuthSettings,
    password: str,
    display_name: str,
    status: str,
    invited: bool,
    invitation_token: str | None,
    ip: str | None,
    user_agent: str | None,
) -> Registration:
    """Answer a sign-up for an address that has an account as if it were new (no enumeration).

    Nothing about the account changes. Its owner is mailed (at most ``_TAKEN_MAILS_PER_HOUR``
    an hour, so the form can't be used to flood a mailbox; deleted accounts get no mail) and the
    attempt is audited as ``user.registration_address_taken``. The password is hashed and thrown
    away so this path costs what creating an account costs (argon2 dominates both).
    """
    from openkb.security import hash_password

    hash_password(password)
    if not settings.email_verification_required and settings.first_user_becomes_admin and not has_system_admin(session):
        status = "active"  # what a new account would have become: the first administrator
    mailed = existing.status != "deleted" and ratelimit.hit(
        session, f"register-taken:{existing.email}", _TAKEN_MAILS_PER_HOUR, 3600
    )
    if mailed:
        _mail_address_taken(session, ctx, existing)
    record_audit(
        session,
        tenant_id=tenant_id,
        actor=Principal.anonymous(tenant_id),
        action="user.registration_address_taken",
        object_type="user",
        object_id=existing.id,
        ip=ip,
        user_agent=user_agent,
        metadata={"status": existing.status, "invited": invited, "mailed": mailed},
    )
    now = utcnow()
    stand_in = User(
        id=uuid.uuid4(),
        email=existing.email,
        display_name=display_name,
        status=status,
        password_hash=None,
        email_verified_at=None,
        created_at=now,
        updated_at=now,
    )
    inv_result = None
    if invitation_token:
        inv_result = (
            {"status": "pending_verification"}
            if settings.email_verification_required
            else {"status": "deferred", "detail": "accept the invitation once your account is active"}
        )
    return Registration(
        user=stand_in,
        tenant_id=tenant_id,
        verification_sent=settings.email_verification_required,
        became_system_admin=False,
        invitation=inv_result,
        address_taken=True,
        mail_to_outbox=settings.email_verification_required and ctx.mailer.to_outbox,
    )


def _mail_address_taken(session: Session, ctx, user: User) -> None:
    """An account still waiting for its address to be confirmed gets a fresh verification link
    (the likely story: its owner lost the first mail and signed up again); any other gets word
    that someone tried."""
    if user.status == "pending_email_verification":
        email_tokens.send_verification(session, ctx, user)
        return
    base = ctx.settings.app_base_url.rstrip("/")
    body = (
        f"Hello {user.display_name},\n\nsomeone tried to create a new OpenKB account with this email "
        f"address, which already has an account.\n\nIf it was you, sign in at {base}/login with your "
        "existing password; if you forgot it, reset it from the sign-in page.\n\nIf it wasn't you, "
        "you can ignore this mail: nothing about your account has changed.\n"
    )
    email_tokens.mail_after_commit(session, ctx, user.email, "Someone tried to register with your address", body)


def primary_tenant_id(session: Session, user_id: uuid.UUID) -> uuid.UUID | None:
    from openkb.bootstrap import DEFAULT_TENANT_SLUG

    rows = session.exec(
        select(TenantMembership.tenant_id, Tenant.slug)  # type: ignore[call-overload]
        .join(Tenant, Tenant.id == TenantMembership.tenant_id)
        .where(TenantMembership.user_id == user_id)
        .order_by(TenantMembership.created_at)
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


def verify_email(
    session: Session,
    ctx,
    token: str,
    *,
    invitation_token: str | None = None,  # noqa: ANN001
    ip: str | None = None,
    user_agent: str | None = None,
) -> Verification:
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
    record_audit(
        session,
        tenant_id=tenant_id,
        actor=Principal.user(user, tenant_id) if tenant_id else None,
        action="user.email_verified",
        object_type="user",
        object_id=user.id,
        ip=ip,
        user_agent=user_agent,
        metadata={"before": {"status": before}, "after": {"status": user.status}, "became_system_admin": became_admin},
    )
    inv_result = (
        _accept_invitation(session, user, tenant_id, invitation_token)
        if invitation_token and tenant_id is not None
        else None
    )
    return Verification(user=user, became_system_admin=became_admin, invitation=inv_result)
