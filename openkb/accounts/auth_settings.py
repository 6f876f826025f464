"""Registration settings (docs/accounts.md#registration-settings): read tenant-first, then the instance default.

The instance default is the ``tenant_id IS NULL`` row; a tenant row overrides it *as a whole*
(it is created as a copy of the instance default, then edited), so "effective settings" never
mixes fields from two rows.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, select

from openkb.accounts.users import AdminScope
from openkb.audit import record_audit
from openkb.errors import NotFound, PermissionDenied, ValidationError
from openkb.models import AuthSettings, Tenant
from openkb.models._base import utcnow
from openkb.models.enums import SIGNUP_STATUSES

FIELDS = (
    "registration_enabled",
    "email_verification_required",
    "default_signup_status",
    "invited_user_auto_active",
    "allowed_email_domains",
    "invite_required",
    "first_user_becomes_admin",
)
_DOMAIN_MAX = 253


@dataclass(frozen=True)
class Effective:
    row: AuthSettings
    source: str  # "tenant" | "instance"


def instance_row(session: Session) -> AuthSettings:
    row = session.exec(select(AuthSettings).where(AuthSettings.tenant_id.is_(None))).first()  # type: ignore[union-attr]
    if row is None:
        from openkb.bootstrap import ensure_instance

        ensure_instance(session)
        row = session.exec(select(AuthSettings).where(AuthSettings.tenant_id.is_(None))).first()  # type: ignore[union-attr]
    assert row is not None
    return row


def tenant_row(session: Session, tenant_id: uuid.UUID) -> AuthSettings | None:
    return session.exec(select(AuthSettings).where(AuthSettings.tenant_id == tenant_id)).first()


def effective(session: Session, tenant_id: uuid.UUID | None) -> Effective:
    if tenant_id is not None:
        row = tenant_row(session, tenant_id)
        if row is not None:
            return Effective(row, "tenant")
    return Effective(instance_row(session), "instance")


def as_dict(row: AuthSettings) -> dict[str, Any]:
    out = {f: getattr(row, f) for f in FIELDS}
    out["allowed_email_domains"] = list(row.allowed_email_domains) if row.allowed_email_domains else None
    return out


def email_domain_allowed(row: AuthSettings, email: str) -> bool:
    domains = row.allowed_email_domains
    if not domains:
        return True
    domain = email.rsplit("@", 1)[-1].lower()
    return domain in {d.lower() for d in domains}


def normalize_domains(domains: list[str] | None) -> list[str] | None:
    if domains is None:
        return None
    out: list[str] = []
    for d in domains:
        d = (d or "").strip().lower().lstrip("@")
        if not d or len(d) > _DOMAIN_MAX or "@" in d or " " in d or "." not in d:
            raise ValidationError(f"not an email domain: {d!r}", field="allowed_email_domains")
        if d not in out:
            out.append(d)
    return out or None


def _target(session: Session, scope: AdminScope, tenant_id: uuid.UUID | None) -> uuid.UUID | None:
    """Which row an admin reads/writes: system_admin -> instance unless a tenant is named;
    tenant_admin -> their own tenant (naming another tenant is NOT_FOUND: not theirs to see)."""
    if tenant_id is None:
        return None if scope.is_system_admin else scope.tenant_id
    if not scope.can_manage_tenant(tenant_id) or session.get(Tenant, tenant_id) is None:
        raise NotFound("no such tenant")
    return tenant_id


def read_for_admin(
    session: Session, scope: AdminScope, tenant_id: uuid.UUID | None
) -> tuple[uuid.UUID | None, Effective]:
    target = _target(session, scope, tenant_id)
    return target, effective(session, target)


def update(
    session: Session, scope: AdminScope, req: Any, tenant_id: uuid.UUID | None, changes: dict[str, Any]
) -> tuple[uuid.UUID | None, Effective]:
    """Apply ``changes`` (a subset of FIELDS) to the instance row or a tenant override; audited
    with before/after. ``req`` is an ``accounts.admin.Request`` (principal, ip, user agent).

    A tenant_admin edits only their tenant's override (created from the instance default on
    first write), and never its ``first_user_becomes_admin``; only a system_admin edits the
    instance default.
    """
    target = _target(session, scope, tenant_id)
    if target is None and not scope.is_system_admin:
        raise PermissionDenied("only a system_admin edits the instance defaults")
    unknown = set(changes) - set(FIELDS)
    if unknown:
        raise ValidationError(f"unknown setting(s): {', '.join(sorted(unknown))}")
    if "default_signup_status" in changes and changes["default_signup_status"] not in SIGNUP_STATUSES:
        raise ValidationError(
            f"default_signup_status must be one of {', '.join(SIGNUP_STATUSES)}", field="default_signup_status"
        )
    for f in FIELDS:
        if (
            f in changes
            and f not in ("default_signup_status", "allowed_email_domains")
            and not isinstance(changes[f], bool)
        ):
            raise ValidationError(f"{f} must be true or false", field=f)
    if "allowed_email_domains" in changes:
        changes = {**changes, "allowed_email_domains": normalize_domains(changes["allowed_email_domains"])}
    if (
        "first_user_becomes_admin" in changes
        and not scope.is_system_admin
        and changes["first_user_becomes_admin"] != effective(session, target).row.first_user_becomes_admin
    ):
        # it hands out system_admin, a role above a tenant_admin's (docs/accounts.md#first-administrator);
        # the same value sent back, as a settings form sends every field, changes nothing
        raise PermissionDenied("only a system_admin decides whether the first sign-up becomes system_admin")

    if target is None:
        row = instance_row(session)
        before = as_dict(row)
    else:
        existing = tenant_row(session, target)
        if existing is None:
            base = instance_row(session)
            before = as_dict(base)
            row = AuthSettings(tenant_id=target, **as_dict(base))
        else:
            row = existing
            before = as_dict(row)
    for k, v in changes.items():
        setattr(row, k, v)
    row.updated_at = utcnow()
    session.add(row)
    session.flush()
    record_audit(
        session,
        tenant_id=target,
        actor=req.principal,
        action="auth_settings.updated",
        object_type="auth_settings",
        object_id=row.id,
        ip=req.ip,
        user_agent=req.user_agent,
        metadata={"scope": "tenant" if target else "instance", "before": before, "after": as_dict(row)},
    )
    return target, Effective(row, "tenant" if target else "instance")


def delete_override(session: Session, scope: AdminScope, req: Any, tenant_id: uuid.UUID) -> dict[str, Any] | None:
    """Drop a tenant's override (back to the instance default). Returns the removed values."""
    target = _target(session, scope, tenant_id)
    if target is None:
        raise ValidationError("name the tenant whose override to remove", field="tenant_id")
    row = tenant_row(session, target)
    if row is None:
        return None
    before = as_dict(row)
    row_id = row.id
    session.delete(row)
    session.flush()
    record_audit(
        session,
        tenant_id=target,
        actor=req.principal,
        action="auth_settings.override_removed",
        object_type="auth_settings",
        object_id=row_id,
        ip=req.ip,
        user_agent=req.user_agent,
        metadata={"before": before},
    )
    return before
