"""Settings of a tenant kept on its own row (docs/accounts.md#tenant-settings): the default time
zone of its members, for the apps' daily quotas (docs/apps.md#limits-and-quotas).

A member's own ``users.time_zone`` wins; the tenant's ``time_zone`` applies to members who set
none; with neither the day is UTC's. A tenant_admin reads and sets their own tenant; a
system_admin any tenant (the CLI operator is one). Validation is the profile's
(``check_time_zone``: a zone PostgreSQL knows, else ``VALIDATION_ERROR`` on ``time_zone``), so
the two places refuse exactly the same names. Trap: the quota's day is computed in PostgreSQL
from these columns on every charge (``openkb.apps.quotas.TIME_ZONE_SQL``): nothing caches them.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlmodel import Session

from openkb.accounts.account import check_time_zone
from openkb.accounts.users import access_admin
from openkb.audit import record_audit
from openkb.errors import NotFound, ValidationError
from openkb.models import Tenant
from openkb.permissions.principal import Principal


def _tenant(session: Session, principal: Principal, tenant_id: uuid.UUID | None, *, lock: bool = False) -> Tenant:
    """The tenant an administrator names (default: their own); another tenant than a
    tenant_admin's is NotFound, like one that does not exist."""
    scope = access_admin(session, principal)
    target = tenant_id if tenant_id is not None else scope.tenant_id
    if target is None:
        raise ValidationError("name the tenant", field="tenant_id")
    if not scope.can_manage_tenant(target):
        raise NotFound("no such tenant")
    t = session.get(Tenant, target, with_for_update=lock or None)
    if t is None:
        raise NotFound("no such tenant")
    return t


def settings_out(t: Tenant) -> dict[str, Any]:
    return {"tenant_id": t.id, "tenant_slug": t.slug, "time_zone": t.time_zone}


def read_settings(session: Session, principal: Principal, tenant_id: uuid.UUID | None = None) -> dict[str, Any]:
    return settings_out(_tenant(session, principal, tenant_id))


def set_time_zone(
    session: Session,
    principal: Principal,
    tenant_id: uuid.UUID | None,
    time_zone: str | None,
    *,
    ip: str | None = None,
    user_agent: str | None = None,
) -> dict[str, Any]:
    """Set (an IANA name) or clear (None or empty: UTC) the tenant's default time zone; audited
    ``tenant.settings_updated`` with before/after when it changes."""
    t = _tenant(session, principal, tenant_id, lock=True)
    value = check_time_zone(session, time_zone)
    before = t.time_zone
    if value != before:
        t.time_zone = value
        session.add(t)
        session.flush()
        record_audit(
            session, tenant_id=t.id, actor=principal, action="tenant.settings_updated", object_type="tenant",
            object_id=t.id, ip=ip, user_agent=user_agent,
            metadata={"before": {"time_zone": before}, "after": {"time_zone": value}},
        )  # fmt: skip
    return settings_out(t)


__all__ = ["read_settings", "set_time_zone", "settings_out"]
