"""Make a user tenant administrator, or a plain member again (the admin console's users tab).

Within the administrator's own tenant (``access_admin`` + ``access_user``), or any tenant for a
system_admin. Traps: an administrator cannot change their own role (no locking oneself out),
and only a system_admin touches a system_admin's memberships (any of them: a system_admin in
one tenant administers all). Administration grants no content access
(docs/permissions.md#administrators), so this changes nothing anyone can read.
"""

from __future__ import annotations

import uuid

from sqlmodel import Session, select

from openkb.accounts.admin import access_user, is_system_admin
from openkb.accounts.users import access_admin
from openkb.audit import record_audit
from openkb.errors import NotFound, PermissionDenied, ValidationError
from openkb.models import TenantMembership
from openkb.permissions.principal import Principal

SETTABLE_ROLES = ("tenant_admin", "member")


def set_tenant_role(
    session: Session, principal: Principal, user_id: uuid.UUID, role: str, *, tenant_id: uuid.UUID | None = None
) -> TenantMembership:
    """``tenant_id`` names the membership to change (a system_admin acting across tenants: the
    console's users list shows one row per membership); default: the admin's own tenant if the
    user is in it, else the user's oldest membership. A tenant_admin naming another tenant gets
    NotFound, like a user outside their tenant."""
    if role not in SETTABLE_ROLES:
        raise ValidationError(f"role must be one of {', '.join(SETTABLE_ROLES)}", field="role")
    scope = access_admin(session, principal)
    user, default_tenant = access_user(session, scope, user_id)
    if tenant_id is not None and not scope.can_manage_tenant(tenant_id):
        raise NotFound("no such tenant")
    tenant_id = tenant_id or default_tenant
    if user.id == scope.user_id:
        raise PermissionDenied("administrators cannot change their own role")
    if not scope.is_system_admin and is_system_admin(session, user.id):
        # A system_admin anywhere administers every tenant; a tenant_admin promoting or demoting
        # their other memberships would still be managing someone above them.
        raise PermissionDenied("only a system_admin changes a system_admin's memberships")
    row = session.exec(
        select(TenantMembership)
        .where(TenantMembership.user_id == user.id, TenantMembership.tenant_id == tenant_id)
        .with_for_update()
    ).first()
    if row is None:
        raise NotFound("no such user")
    if row.role == "system_admin":
        raise PermissionDenied("a system_admin's role is not changed here")
    before = row.role
    if before != role:
        row.role = role
        session.add(row)
        session.flush()
        record_audit(
            session,
            tenant_id=tenant_id,
            actor=principal,
            action="user.role_changed",
            object_type="user",
            object_id=user.id,
            metadata={"email": user.email, "before": {"role": before}, "after": {"role": role}},
        )
    return row


__all__ = ["SETTABLE_ROLES", "set_tenant_role"]
