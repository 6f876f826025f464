"""Administrator actions on accounts (docs/accounts.md#activation): list, activate, suspend, reject, resend mail.

The status changes take the acting principal (a signed-in administrator over REST, the system
principal for ``openkb user activate|suspend``) and authorize it themselves with
``users.access_admin``; they touch only users of the admin's tenant unless the admin is a
system_admin (the system principal is one), and a user outside that scope is NOT_FOUND. Every
status change is audited here, with before/after, so REST and the CLI write the same row once.
Administration grants no content access (docs/permissions.md#administrators).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import exists, func
from sqlmodel import Session, col, select

from openkb.accounts import email_tokens
from openkb.accounts.sessions import revoke_user_sessions
from openkb.accounts.users import ADMIN_ROLES, AdminScope, access_admin
from openkb.audit import record_audit
from openkb.errors import Conflict, NotFound, PermissionDenied, ValidationError
from openkb.models import AuditLog, Tenant, TenantMembership, User
from openkb.models._base import utcnow
from openkb.models.enums import USER_STATUSES
from openkb.permissions.principal import Principal

MAX_PAGE = 200


@dataclass(frozen=True)
class AdminUserRow:
    user: User
    tenant_id: uuid.UUID
    tenant_slug: str
    role: str


@dataclass(frozen=True)
class Request:
    """Who is acting, for the audit row."""

    principal: Principal
    ip: str | None = None
    user_agent: str | None = None


def _page(limit: int, offset: int) -> tuple[int, int]:
    if limit < 1 or limit > MAX_PAGE:
        raise ValidationError(f"limit must be 1-{MAX_PAGE}", field="limit")
    if offset < 0:
        raise ValidationError("offset must be >= 0", field="offset")
    return limit, offset


def list_users(
    session: Session,
    scope: AdminScope,
    *,
    status: str | None = None,
    tenant_id: uuid.UUID | None = None,
    q: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[AdminUserRow], int]:
    """Users with their membership in the admin's tenant (system_admin: every tenant, or the
    named one). Returns (page, total)."""
    limit, offset = _page(limit, offset)
    if status is not None and status not in USER_STATUSES:
        raise ValidationError(f"status must be one of {', '.join(USER_STATUSES)}", field="status")
    if tenant_id is not None and not scope.can_manage_tenant(tenant_id):
        raise NotFound("no such tenant")
    if not scope.is_system_admin:
        tenant_id = scope.tenant_id
    base = (
        select(User, TenantMembership.tenant_id, Tenant.slug, TenantMembership.role)  # type: ignore[call-overload]
        .join(TenantMembership, TenantMembership.user_id == User.id)
        .join(Tenant, Tenant.id == TenantMembership.tenant_id)
    )
    if tenant_id is not None:
        base = base.where(TenantMembership.tenant_id == tenant_id)
    if status:
        base = base.where(User.status == status)
    if q:
        like = "%" + q.strip().lower().replace("%", r"\%").replace("_", r"\_") + "%"
        base = base.where(func.lower(User.email).like(like) | func.lower(User.display_name).like(like))
    total = session.exec(select(func.count()).select_from(base.subquery())).one()
    rows = session.exec(base.order_by(User.created_at, User.id, Tenant.slug).limit(limit).offset(offset)).all()
    return [AdminUserRow(u, tid, slug, role) for u, tid, slug, role in rows], int(total)


def access_user(
    session: Session, scope: AdminScope, user_id: uuid.UUID, *, lock: bool = False
) -> tuple[User, uuid.UUID]:
    """Fetch + authorize a user the admin may manage; returns (user, the tenant to audit under:
    the admin's own tenant if the user is in it, else the user's oldest membership)."""
    q = (
        select(TenantMembership.tenant_id)
        .where(TenantMembership.user_id == user_id)  # type: ignore[call-overload]
        .order_by(TenantMembership.created_at)
    )
    if not scope.is_system_admin:
        q = q.where(TenantMembership.tenant_id == scope.tenant_id)
    tenants = list(session.exec(q).all())
    if not tenants:
        raise NotFound("no such user")
    uq = select(User).where(User.id == user_id)
    user = session.exec(uq.with_for_update() if lock else uq).first()
    if user is None:
        raise NotFound("no such user")
    return user, scope.tenant_id if scope.tenant_id in tenants else tenants[0]


def _any_administrator(session: Session) -> bool:
    """Whether anyone holds an administrator role (``ADMIN_ROLES``) in any tenant."""
    return bool(session.exec(select(exists().where(col(TenantMembership.role).in_(ADMIN_ROLES)))).one())


def is_system_admin(session: Session, user_id: uuid.UUID) -> bool:
    """Whether ``user_id`` holds ``system_admin`` in any tenant."""
    return bool(
        session.exec(
            select(exists().where(TenantMembership.user_id == user_id, TenantMembership.role == "system_admin"))
        ).one()
    )


def _member_elsewhere(session: Session, user_id: uuid.UUID, tenant_id: uuid.UUID | None) -> bool:
    """Whether the user has a membership in a tenant other than ``tenant_id``."""
    return bool(
        session.exec(
            select(exists().where(TenantMembership.user_id == user_id, TenantMembership.tenant_id != tenant_id))
        ).one()
    )


def _change_status(
    session: Session, principal: Principal, user_id: uuid.UUID, *, to: str, allowed_from: tuple[str, ...], action: str
) -> tuple[User, str, uuid.UUID]:
    """The user, their status before and the tenant the change is audited in."""
    scope = access_admin(session, principal)
    user, audit_tenant = access_user(session, scope, user_id, lock=True)
    if user.id == scope.user_id and to != "active":
        raise PermissionDenied("administrators cannot change their own status")
    if is_system_admin(session, user.id) and not scope.is_system_admin:
        raise PermissionDenied("only a system_admin can change the status of a system_admin")
    if not scope.is_system_admin and _member_elsewhere(session, user.id, scope.tenant_id):
        # A status is one for all the user's tenants: suspending them here would lock them out of
        # a tenant this administrator does not manage (like deletion, accounts/deletion.py).
        raise PermissionDenied("the user also belongs to another tenant: a system administrator's decision")
    before = user.status
    if before == to:
        return user, before, audit_tenant  # idempotent: nothing changed, nothing audited
    if before not in allowed_from:
        verb = {"user.activated": "activate", "user.suspended": "suspend", "user.rejected": "reject"}[action]
        raise Conflict(f"cannot {verb} a user whose status is {before}", status=before)
    user.status = to
    user.updated_at = utcnow()
    session.add(user)
    session.flush()
    killed = revoke_user_sessions(session, user.id) if to != "active" else 0
    record_audit(
        session,
        tenant_id=audit_tenant,
        actor=principal,
        action=action,
        object_type="user",
        object_id=user.id,
        metadata={
            "before": {"status": before},
            "after": {"status": to},
            "email": user.email,
            **({"sessions_revoked": killed} if killed else {}),
        },
    )
    return user, before, audit_tenant


_PENDING = ("pending_activation", "pending_email_verification")


def activate(session: Session, principal: Principal, user_id: uuid.UUID) -> User:
    """pending_activation/suspended -> active. An unverified user may be activated too (the admin
    vouches for the address); email_verified_at stays empty.

    The operator's activation of a pending sign-up (the system principal: ``openkb user
    activate``) completes its registration in place of the mailed link, so the
    first-administrator rule applies as it does at verification
    (docs/accounts.md#first-administrator): on a fresh appliance whose mail goes to the outbox,
    activating the first sign-up gives the instance its administrator instead of an active
    member and none. Only on an instance with no administrator of any kind: where tenant_admins
    run things, an activation is just an activation (such an instance gets its system_admin from
    ``openkb init --email``), and a tenant_admin's activation never grants it (a role above
    their own)."""
    from openkb.accounts import auth_settings
    from openkb.accounts.registration import maybe_make_first_admin

    user, before, tenant_id = _change_status(
        session,
        principal,
        user_id,
        to="active",
        allowed_from=(*_PENDING, "suspended"),
        action="user.activated",
    )
    if before in _PENDING and principal.kind == "system" and not _any_administrator(session):
        maybe_make_first_admin(session, user, tenant_id, auth_settings.effective(session, tenant_id).row)
    return user


def suspend(session: Session, principal: Principal, user_id: uuid.UUID) -> User:
    """Any live status -> suspended; the user's sessions are revoked and their tokens stop
    working on the next request (both check the status on every use)."""
    return _change_status(
        session,
        principal,
        user_id,
        to="suspended",
        allowed_from=("active", *_PENDING),
        action="user.suspended",
    )[0]


def reject(session: Session, principal: Principal, user_id: uuid.UUID) -> User:
    """Refuse a pending sign-up (docs/accounts.md#activation, "reject"): status deleted, the row stays for audit."""
    return _change_status(
        session,
        principal,
        user_id,
        to="deleted",
        allowed_from=_PENDING,
        action="user.rejected",
    )[0]


def resend_verification(session: Session, ctx, principal: Principal, user_id: uuid.UUID) -> User:  # noqa: ANN001
    """Mail a new verification link (sent after commit: a rolled-back request mails nothing)."""
    scope = access_admin(session, principal)
    user, audit_tenant = access_user(session, scope, user_id)
    if user.status != "pending_email_verification":
        raise Conflict(f"the user's email is already verified (status {user.status})", status=user.status)
    email_tokens.send_verification(session, ctx, user)
    record_audit(
        session,
        tenant_id=audit_tenant,
        actor=principal,
        action="user.verification_resent",
        object_type="user",
        object_id=user.id,
        metadata={"email": user.email},
    )
    return user


def list_audit_logs(
    session: Session,
    scope: AdminScope,
    *,
    action: str | None = None,
    object_type: str | None = None,
    object_id: uuid.UUID | None = None,
    actor_user_id: uuid.UUID | None = None,
    tenant_id: uuid.UUID | None = None,
    since: datetime | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[AuditLog], int]:
    """Newest first. A tenant_admin sees their tenant's rows; a system_admin sees all rows
    (including instance-level ones with no tenant) or the named tenant's."""
    limit, offset = _page(limit, offset)
    q = select(AuditLog)
    if not scope.is_system_admin:
        if tenant_id is not None and tenant_id != scope.tenant_id:
            raise NotFound("no such tenant")
        q = q.where(AuditLog.tenant_id == scope.tenant_id)
    elif tenant_id is not None:
        q = q.where(AuditLog.tenant_id == tenant_id)
    if action:
        # "user." matches every user action; an exact name matches itself.
        q = q.where(AuditLog.action.startswith(action) if action.endswith(".") else AuditLog.action == action)  # type: ignore[attr-defined]
    if object_type:
        q = q.where(AuditLog.object_type == object_type)
    if object_id:
        q = q.where(AuditLog.object_id == object_id)
    if actor_user_id:
        q = q.where(AuditLog.actor_user_id == actor_user_id)
    if since:
        q = q.where(AuditLog.created_at >= since)
    total = session.exec(select(func.count()).select_from(q.subquery())).one()
    rows = session.exec(
        q.order_by(AuditLog.created_at.desc(), AuditLog.id.desc())  # type: ignore[attr-defined]
        .limit(limit)
        .offset(offset)
    ).all()
    return list(rows), int(total)


def audit_row(row: AuditLog) -> dict[str, Any]:
    return {
        "id": str(row.id),
        "tenant_id": str(row.tenant_id) if row.tenant_id else None,
        "actor_user_id": str(row.actor_user_id) if row.actor_user_id else None,
        "actor_type": row.actor_type,
        "action": row.action,
        "object_type": row.object_type,
        "object_id": str(row.object_id) if row.object_id else None,
        "metadata": row.meta,
        "ip": row.ip,
        "user_agent": row.user_agent,
        "created_at": row.created_at.isoformat(),
    }
