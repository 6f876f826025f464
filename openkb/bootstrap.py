"""First-run state every instance needs: the instance auth_settings row and a default tenant.

Idempotent by construction (looked up before insert, unique constraints behind it), so ``openkb up``
and ``openkb init`` may run it on every start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlmodel import Session, select

from openkb.errors import Conflict
from openkb.models import AuthSettings, Tenant, TenantMembership, User

if TYPE_CHECKING:
    from openkb.permissions import Principal

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


def first_admin_state(session: Session) -> str:
    """``"present"`` when a system_admin exists; else ``"first_sign_up"`` when the default
    tenant's first completed sign-up will become one (docs/accounts.md#first-administrator), or
    ``"init"`` when only ``openkb init --email`` can name one. What ``openkb up`` tells the
    operator, instead of a promise that no longer holds."""
    from openkb.accounts import auth_settings
    from openkb.accounts.users import has_system_admin

    if has_system_admin(session):
        return "present"
    tenant = default_tenant(session)
    return "first_sign_up" if auth_settings.effective(session, tenant.id).row.first_user_becomes_admin else "init"


@dataclass
class FirstAdmin:
    user: User | None  # None: a system_admin already existed and nothing was changed
    note: str
    created: bool = True  # False: an existing account was made system_admin


def create_first_admin(
    session: Session, *, tenant: Tenant, email: str, password: Callable[[], str], display_name: str | None = None
) -> FirstAdmin:
    """``openkb init --email``: the instance's first ``system_admin``, audited ``user.create`` like
    every other account (the first administrator used to appear in no audit row at all).

    Runs only while no system_admin exists (docs/accounts.md#first-administrator), so re-running
    a setup script is harmless. An address that already has an account is promoted instead of
    refused: without that, an operator whose first sign-up never got its verification mail was
    left with no administrator and no command to name one. ``password`` is a callable so that
    nobody is prompted for a password that would not be used. The row is written as the system principal; the CLI's
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
    existing = session.exec(select(User).where(User.email == email, User.status != "deleted")).first()
    if existing is not None:
        return _promote(session, existing, tenant, system)
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


def _promote(session: Session, user: User, tenant: Tenant, system: Principal) -> FirstAdmin:
    """``openkb init --email`` naming someone who already signed up (typically the first sign-up
    on an appliance whose verification mail nobody received): they become the first
    system_admin and active, their password unchanged; none is read. Their membership in
    ``tenant`` is the one promoted, or else their first one."""
    from openkb.accounts.registration import grant_first_admin

    tenant_id = session.exec(
        select(TenantMembership.tenant_id)
        .where(TenantMembership.user_id == user.id)
        .order_by(TenantMembership.tenant_id != tenant.id, TenantMembership.created_at)  # type: ignore[arg-type]
    ).first()
    if tenant_id is None:
        raise Conflict(f"{user.email} belongs to no tenant; cannot make them system_admin")
    if not grant_first_admin(session, user, tenant_id, reason="openkb_init", actor=system):
        # another first administrator won the lock since the check above (a sign-up completing)
        return FirstAdmin(None, "a system_admin already exists; nothing created")
    return FirstAdmin(user, f"made the existing user {user.email} system_admin (password unchanged)", created=False)
