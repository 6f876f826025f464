"""Operator actions on users and tenants, shared by ``openkb user|tenant|init`` and the admin API.

``add_tenant`` and ``add_user`` take the acting principal (the CLI acts as the system principal,
``Principal.system()``; an administrator over REST as themselves), authorize it and write their
audit row, so no adapter audits. ``create_tenant``/``create_user`` are the unaudited building
blocks for services that audit in their own terms (registration, bootstrap); an adapter never
calls them directly.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func
from sqlmodel import Session, select

from openkb.errors import AlreadyExists, NotFound, ValidationError
from openkb.models import Tenant, TenantMembership, User
from openkb.models._base import utcnow
from openkb.models.enums import TENANT_ROLES, USER_STATUSES

if TYPE_CHECKING:  # a runtime import would be circular (permissions -> accounts)
    from openkb.permissions.principal import Principal

# No whitespace, no control characters (NUL can't even be stored in PostgreSQL text).
EMAIL_RE = re.compile(r"^[^@\s\x00-\x1f\x7f]+@[^@\s\x00-\x1f\x7f]+\.[^@\s\x00-\x1f\x7f]+$")
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
MIN_PASSWORD = 8


def normalize_email(email: str) -> str:
    e = (email or "").strip().lower()
    if len(e) > 320 or not EMAIL_RE.match(e):
        raise ValidationError(f"not a valid email address: {email!r}", field="email")
    return e


def check_password(password: str, *context: str | None) -> None:
    """Length, then guessability: a password among the most common ones (``password1``,
    ``12345678``, a keyboard row) or made of the account's own email or name is refused, as
    NIST SP 800-63B asks of a blocklist. zxcvbn's score 0 (fewer than ~1,000 guesses); its
    dictionaries ship with the package (nothing is fetched). ``context``: the account's email
    and display name. Scored on the first 72 characters (zxcvbn's limit; a longer password is
    not short of guesses unless its start is)."""
    if password is None or len(password) < MIN_PASSWORD:
        raise ValidationError(f"password must be at least {MIN_PASSWORD} characters", field="password")
    if len(password) > 1024:
        raise ValidationError("password is too long (1024 characters at most)", field="password")
    from zxcvbn import zxcvbn  # its dictionaries load on first use (~0.2 s), not at every import

    words = {w.lower() for c in (*context, "openkb") if c for w in (c, *re.split(r"[@._\s-]+", c)) if len(w) >= 3}
    verdict = zxcvbn(password[:72], user_inputs=sorted(words))
    why = verdict["feedback"].get("warning") or "It is too easy to guess."
    if verdict["score"] > 0 and words:
        # zxcvbn counts "janedoe2024" as two words and a year; with the account's own words taken
        # out, what is left must stand on its own (~100,000 guesses: "2024" or "x7qp" do not)
        low = rest = password.lower()
        for w in sorted(words, key=len, reverse=True):
            rest = rest.replace(w, "")
        # (the spaces that joined them add nothing)
        if rest != low and (not (rest := "".join(rest.split())) or zxcvbn(rest[:72])["guesses_log10"] < 5):
            verdict, why = {"score": 0}, "It is mostly the account's own email address or name."
    if verdict["score"] == 0:
        raise ValidationError(
            f"password is too easy to guess ({why[0].lower()}{why[1:].rstrip('.')}); a few unrelated words make a strong one",
            field="password",
            reason="too_guessable",
        )


def get_tenant(session: Session, slug_or_id: str) -> Tenant:
    t: Tenant | None = None
    try:
        t = session.get(Tenant, uuid.UUID(slug_or_id))
    except ValueError:
        t = session.exec(select(Tenant).where(Tenant.slug == slug_or_id)).first()
    if t is None:
        raise NotFound(f"no tenant {slug_or_id!r}")
    return t


def create_tenant(session: Session, *, name: str, slug: str) -> Tenant:
    slug = slug.strip().lower()
    if not SLUG_RE.match(slug):
        raise ValidationError("tenant slug must be lowercase letters, digits and dashes (1-63)", field="slug")
    if not name.strip() or len(name) > 1000:
        raise ValidationError("tenant name must be 1-1000 characters", field="name")
    if session.exec(select(Tenant).where(Tenant.slug == slug)).first() is not None:
        raise AlreadyExists(f"tenant {slug!r} already exists")
    t = Tenant(name=name.strip(), slug=slug)
    session.add(t)
    session.flush()
    return t


def add_tenant(session: Session, principal: Principal, *, name: str, slug: str) -> Tenant:
    """Create a tenant as ``principal`` (system administrators only), audited ``tenant.create``."""
    from openkb.audit import record_audit
    from openkb.errors import PermissionDenied

    if not access_admin(session, principal).is_system_admin:
        raise PermissionDenied("only a system_admin can create tenants")
    t = create_tenant(session, name=name, slug=slug)
    record_audit(
        session,
        tenant_id=t.id,
        actor=principal,
        action="tenant.create",
        object_type="tenant",
        object_id=t.id,
        metadata={"slug": t.slug, "name": t.name},
    )
    return t


def list_tenants(session: Session) -> list[tuple[Tenant, int]]:
    rows = session.exec(
        select(Tenant, func.count(TenantMembership.id))  # type: ignore[arg-type]
        .join(TenantMembership, TenantMembership.tenant_id == Tenant.id, isouter=True)
        .group_by(Tenant.id)
        .order_by(Tenant.created_at)
    ).all()
    return [(t, int(n)) for t, n in rows]


@dataclass
class UserRow:
    user: User
    tenant_slug: str
    role: str


def find_user(session: Session, email_or_id: str) -> User:
    u: User | None = None
    try:
        u = session.get(User, uuid.UUID(email_or_id))
    except ValueError:
        u = session.exec(select(User).where(User.email == email_or_id.strip().lower())).first()
    if u is None:
        raise NotFound(f"no user {email_or_id!r}")
    return u


# What a new user may start as. Not ``deleted``: that status is what ``delete_user`` leaves (the
# address renamed, the row kept for the history); created that way, the row blocked its real
# address for good, with nothing to undo it.
CREATE_STATUSES = tuple(s for s in USER_STATUSES if s != "deleted")


def create_user(
    session: Session,
    *,
    tenant: Tenant,
    email: str,
    password: str | None,
    display_name: str | None = None,
    role: str = "member",
    status: str = "active",
    verified: bool = True,
) -> User:
    from openkb.security import hash_password

    email = normalize_email(email)
    if role not in TENANT_ROLES:
        raise ValidationError(f"role must be one of {', '.join(TENANT_ROLES)}", field="role")
    if status not in CREATE_STATUSES:
        raise ValidationError(f"a new user's status must be one of {', '.join(CREATE_STATUSES)}", field="status")
    if password is not None:
        check_password(password, email, display_name)
    if session.exec(select(User).where(User.email == email)).first() is not None:
        raise AlreadyExists(f"a user with email {email} already exists")
    name = (display_name or email.split("@")[0]).strip()
    if not name or len(name) > 1000 or "\x00" in name:
        raise ValidationError("display name must be 1-1000 characters", field="display_name")
    u = User(
        email=email,
        display_name=name,
        status=status,
        password_hash=hash_password(password) if password is not None else None,
        email_verified_at=utcnow() if verified else None,
    )
    session.add(u)
    session.flush()
    session.add(TenantMembership(tenant_id=tenant.id, user_id=u.id, role=role))
    session.flush()
    return u


def add_user(
    session: Session,
    principal: Principal,
    *,
    tenant: Tenant,
    email: str,
    password: str | None,
    display_name: str | None = None,
    role: str = "member",
    status: str = "active",
) -> User:
    """Create an (email-verified) user in ``tenant`` as ``principal``, audited ``user.create``.

    A tenant_admin adds users to their own tenant only and never a system_admin; the system
    principal (the CLI) may do anything.
    """
    from openkb.audit import record_audit
    from openkb.errors import PermissionDenied

    scope = access_admin(session, principal)
    if not scope.can_manage_tenant(tenant.id):
        raise NotFound(f"no tenant {tenant.slug!r}")
    if role == "system_admin" and not scope.is_system_admin:
        raise PermissionDenied("only a system_admin can create a system_admin")
    u = create_user(
        session, tenant=tenant, email=email, password=password, display_name=display_name, role=role, status=status
    )
    record_audit(
        session,
        tenant_id=tenant.id,
        actor=principal,
        action="user.create",
        object_type="user",
        object_id=u.id,
        metadata={"email": u.email, "role": role, "status": u.status},
    )
    return u


def list_users(session: Session, *, status: str | None = None, tenant: Tenant | None = None) -> list[UserRow]:
    q = (
        select(User, Tenant.slug, TenantMembership.role)  # type: ignore[call-overload]
        .join(TenantMembership, TenantMembership.user_id == User.id)
        .join(Tenant, Tenant.id == TenantMembership.tenant_id)
    )
    if status:
        if status not in USER_STATUSES:
            raise ValidationError(f"status must be one of {', '.join(USER_STATUSES)}", field="status")
        q = q.where(User.status == status)
    if tenant is not None:
        q = q.where(TenantMembership.tenant_id == tenant.id)
    return [UserRow(u, slug, role) for u, slug, role in session.exec(q.order_by(User.created_at)).all()]


def has_system_admin(session: Session) -> bool:
    return (
        session.exec(select(TenantMembership.id).where(TenantMembership.role == "system_admin").limit(1)).first()
        is not None
    )


def set_status(session: Session, user: User, status: str) -> tuple[str, str]:
    """Returns (before, after). Sessions of a suspended user die on their next request (checked there)."""
    if status not in USER_STATUSES:
        raise ValidationError(f"status must be one of {', '.join(USER_STATUSES)}", field="status")
    before = user.status
    user.status = status
    user.updated_at = utcnow()
    session.add(user)
    session.flush()
    return before, status


# --- roles and admin scope -------------------------------------------------------------------

ADMIN_ROLES = ("tenant_admin", "system_admin")


@dataclass(frozen=True)
class TenantRole:
    tenant_id: uuid.UUID
    tenant_slug: str
    role: str


def tenant_roles(session: Session, user_id: uuid.UUID) -> list[TenantRole]:
    rows = session.exec(
        select(TenantMembership.tenant_id, Tenant.slug, TenantMembership.role)  # type: ignore[call-overload]
        .join(Tenant, Tenant.id == TenantMembership.tenant_id)
        .where(TenantMembership.user_id == user_id)
        .order_by(TenantMembership.created_at)
    ).all()
    return [TenantRole(tid, slug, role) for tid, slug, role in rows]


@dataclass(frozen=True)
class AdminScope:
    """What an administrator may administer: every tenant (system_admin) or one tenant.

    Administration never implies content access (docs/permissions.md#administrators): nothing here is consulted by the
    permission service, and no content route should accept an ``AdminScope`` as a read grant.
    """

    user_id: uuid.UUID | None  # None: the system principal (CLI operator), which is no user
    tenant_id: uuid.UUID | None  # None: the system principal, which acts in no tenant
    is_system_admin: bool

    def can_manage_tenant(self, tenant_id: uuid.UUID | None) -> bool:
        return self.is_system_admin or (tenant_id is not None and tenant_id == self.tenant_id)


def access_admin(session: Session, principal) -> AdminScope:  # noqa: ANN001 - Principal (import cycle)
    """Fetch + authorize: the caller is tenant_admin of its tenant or system_admin somewhere.

    The system principal (the operator at the command line, ``Principal.system()``) is a
    system_admin acting in no tenant. REST never builds one: it exists only in-process.

    Raises PermissionDenied (admin routes are not secret, so 403 rather than 404).
    """
    from openkb.errors import PermissionDenied, Unauthenticated

    if principal.kind == "system":
        return AdminScope(user_id=None, tenant_id=None, is_system_admin=True)
    if principal.kind != "user" or principal.user_id is None or principal.tenant_id is None:
        raise Unauthenticated("sign in as an administrator")
    roles = session.exec(
        select(TenantMembership.tenant_id, TenantMembership.role)  # type: ignore[call-overload]
        .join(User, User.id == TenantMembership.user_id)
        .where(TenantMembership.user_id == principal.user_id, User.status == "active")
    ).all()
    system = any(role == "system_admin" for _, role in roles)
    tenant_admin = any(tid == principal.tenant_id and role in ADMIN_ROLES for tid, role in roles)
    if not (system or tenant_admin):
        raise PermissionDenied("administrators only")
    return AdminScope(user_id=principal.user_id, tenant_id=principal.tenant_id, is_system_admin=system)
