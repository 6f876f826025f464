"""First-run state every instance needs: the instance auth_settings row and a default tenant.

Idempotent by construction (looked up before insert, unique constraints behind it), so ``openkb up``
and ``openkb init`` may run it on every start.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, select

from openkb.models import AuthSettings, Tenant

DEFAULT_TENANT_SLUG = "default"


@dataclass
class BootstrapResult:
    tenant: Tenant
    created_tenant: bool
    created_auth_settings: bool


def ensure_instance(session: Session) -> BootstrapResult:
    created_settings = False
    if session.exec(select(AuthSettings).where(AuthSettings.tenant_id.is_(None))).first() is None:  # type: ignore[union-attr]
        session.add(AuthSettings(tenant_id=None))
        created_settings = True
    tenant = session.exec(select(Tenant).where(Tenant.slug == DEFAULT_TENANT_SLUG)).first()
    created_tenant = False
    if tenant is None:
        tenant = Tenant(name="Default", slug=DEFAULT_TENANT_SLUG)
        session.add(tenant)
        created_tenant = True
    session.flush()
    return BootstrapResult(tenant=tenant, created_tenant=created_tenant, created_auth_settings=created_settings)


def default_tenant(session: Session) -> Tenant:
    t = session.exec(select(Tenant).where(Tenant.slug == DEFAULT_TENANT_SLUG)).first()
    if t is None:
        t = ensure_instance(session).tenant
    return t
