"""First-run state every instance needs: the instance auth_settings row and a default tenant.

Idempotent by construction (looked up before insert, unique constraints behind it), so ``openkb up``
and ``openkb init`` may run it on every start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlmodel import Session, select

from openkb.models import AuthSettings, Tenant, TenantMembership, User

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


@dataclass
class FirstAdmin:
    user: User | None  # None: a system_admin already existed and nothing was created
    note: str


def create_first_admin(
    session: Session, *, tenant: Tenant, email: str, password: Callable[[], str], display_name: str | None = None
) -> FirstAdmin:
    """``openkb init --email``: the instance's first ``system_admin``, audited ``user.create`` like
    every other account (the first administrator used to appear in no audit row at all).

    Runs only while no system_admin exists (docs/accounts.md#first-administrator), so re-running
    a setup script is harmless. ``password`` is a callable so that nobody is prompted for a
    password that would not be used. The row is written as the system principal; the CLI's
    origin (``via: cli``) marks it, so an audit reader sees how the first administrator came to be.
    """
    from openkb.accounts.users import add_user, has_system_admin, normalize_email
    from openkb.permissions import Principal

    email = normalize_email(email)
    if has_system_admin(session):
        mine = session.exec(
            select(User.id)
            .join(TenantMembership, TenantMembership.user_id == User.id)
            .where(User.email == email, TenantMembership.role == "system_admin")
        ).first()
        if mine is not None:
            return FirstAdmin(None, f"system_admin already exists ({email}); nothing created")
        return FirstAdmin(None, "a system_admin already exists; nothing created")
    system = Principal.system()
    u = add_user(
        session,
        system,
        tenant=tenant,
        email=email,
        password=password(),
        display_name=display_name,
        role="system_admin",
        status="active",
    )
    return FirstAdmin(u, f"created system_admin {u.email}")
