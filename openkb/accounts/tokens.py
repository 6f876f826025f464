"""Personal access tokens (``kbpat_...``): how scripts and MCP clients act as a user.

Stored as SHA-256 only; the plaintext is returned once, at creation. Every use re-reads the
row and the owner's status, so revocation (or the owner's suspension) takes effect on the next
call. Scopes narrow what the token may do; they never widen what the user may do.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import text
from sqlmodel import Session, select

from openkb.audit import record_audit
from openkb.errors import InsufficientScope, NotFound, Unauthenticated, ValidationError
from openkb.models import McpPersonalAccessToken, TenantMembership, User
from openkb.models._base import utcnow
from openkb.permissions.principal import Principal

PAT_PREFIX = "kbpat"
# The read scopes plus the write and admin scopes (docs/accounts.md#scopes). ``kb:write`` is what the permission service
# calls the knowledge-base write scope; ``admin`` lets a token use the /api/admin routes.
# ``facts:read`` (facts and entities, docs/facts.md) is never a default: the user asks for it.
PAT_SCOPES = ("kb:read", "kb:search", "doc:read", "doc:write", "kb:write", "admin", "facts:read")
PatScope = Literal["kb:read", "kb:search", "doc:read", "doc:write", "kb:write", "admin", "facts:read"]
LAST_USED_EVERY = timedelta(minutes=1)
MAX_TOKENS_PER_USER = 100


@dataclass(frozen=True)
class ResolvedToken:
    row: McpPersonalAccessToken
    user: User


def looks_like_pat(value: str) -> bool:
    return value.startswith(PAT_PREFIX + "_")


def validate_scopes(scopes: list[str]) -> list[str]:
    unknown = sorted(set(scopes) - set(PAT_SCOPES))
    if unknown:
        raise ValidationError(f"unknown scope(s) {', '.join(unknown)}; known: {', '.join(PAT_SCOPES)}", field="scopes")
    if not scopes:
        raise ValidationError("a token needs at least one scope", field="scopes")
    return sorted(set(scopes))


def create_pat(
    session: Session,
    principal: Principal,
    *,
    name: str,
    scopes: list[str],
    expires_at: datetime | None = None,
    ip: str | None = None,
    user_agent: str | None = None,
) -> tuple[McpPersonalAccessToken, str]:
    """Mint a token for the calling user. Returns (row, plaintext).

    Only a browser session (``scopes is None``) may mint tokens: a token that could mint tokens
    would outlive its own revocation.
    """
    if not principal.is_user or principal.user_id is None or principal.tenant_id is None:
        raise Unauthenticated("sign in to create a token")
    if principal.scopes is not None:
        raise InsufficientScope("tokens are created from a signed-in session, not with another token")
    name = (name or "").strip()
    if not name or len(name) > 1000:
        raise ValidationError("token name must be 1-1000 characters", field="name")
    scopes = validate_scopes(scopes)
    if expires_at is not None:
        if expires_at.tzinfo is None:
            raise ValidationError("expires_at needs a timezone (e.g. 2030-01-01T00:00:00Z)", field="expires_at")
        if expires_at <= utcnow():
            raise ValidationError("expires_at must be in the future", field="expires_at")
    live = session.exec(
        select(McpPersonalAccessToken.id).where(
            McpPersonalAccessToken.user_id == principal.user_id, McpPersonalAccessToken.status == "active"
        )
    ).all()
    if len(live) >= MAX_TOKENS_PER_USER:
        raise ValidationError(f"at most {MAX_TOKENS_PER_USER} active tokens per user; revoke some first")
    row, plaintext = _insert(
        session,
        tenant_id=principal.tenant_id,
        user_id=principal.user_id,
        name=name,
        scopes=scopes,
        expires_at=expires_at,
    )
    record_audit(
        session,
        tenant_id=principal.tenant_id,
        actor=principal,
        action="pat.created",
        object_type="personal_access_token",
        object_id=row.id,
        ip=ip,
        user_agent=user_agent,
        metadata={"name": name, "scopes": scopes, "expires_at": expires_at},
    )
    return row, plaintext


def _insert(
    session: Session,
    *,
    tenant_id: uuid.UUID,
    user_id: uuid.UUID,
    name: str,
    scopes: list[str],
    expires_at: datetime | None,
) -> tuple[McpPersonalAccessToken, str]:
    from openkb.security import new_token

    plaintext, token_hash = new_token(PAT_PREFIX)
    row = McpPersonalAccessToken(
        tenant_id=tenant_id,
        user_id=user_id,
        name=name,
        token_hash=token_hash,
        scopes=scopes,
        status="active",
        expires_at=expires_at,
    )
    session.add(row)
    session.flush()
    return row, plaintext


def issue_pat(
    session: Session,
    *,
    tenant_id: uuid.UUID,
    user_id: uuid.UUID,
    name: str,
    scopes: list[str],
    expires_at: datetime | None = None,
) -> tuple[McpPersonalAccessToken, str]:
    """Operator/test path (no calling session): the CLI and test fixtures mint tokens with it."""
    return _insert(
        session, tenant_id=tenant_id, user_id=user_id, name=name, scopes=validate_scopes(scopes), expires_at=expires_at
    )


def effective_status(row: McpPersonalAccessToken, now: datetime | None = None) -> str:
    if row.status == "active" and row.expires_at is not None and row.expires_at <= (now or utcnow()):
        return "expired"
    return row.status


def list_pats(session: Session, principal: Principal) -> list[McpPersonalAccessToken]:
    if principal.user_id is None:
        raise Unauthenticated("sign in to list tokens")
    return list(
        session.exec(
            select(McpPersonalAccessToken)
            .where(McpPersonalAccessToken.user_id == principal.user_id)
            .order_by(McpPersonalAccessToken.created_at.desc())  # type: ignore[attr-defined]
        ).all()
    )


def revoke_pat(
    session: Session, principal: Principal, token_id: uuid.UUID, *, ip: str | None = None, user_agent: str | None = None
) -> McpPersonalAccessToken:
    """Someone else's token id is NOT_FOUND, like an unknown one."""
    if principal.user_id is None:
        raise Unauthenticated("sign in to revoke tokens")
    row = session.get(McpPersonalAccessToken, token_id)
    if row is None or row.user_id != principal.user_id:
        raise NotFound("no such token")
    if row.status == "active":
        row.status = "revoked"
        row.revoked_at = utcnow()
        session.add(row)
        session.flush()
        record_audit(
            session,
            tenant_id=row.tenant_id,
            actor=principal,
            action="pat.revoked",
            object_type="personal_access_token",
            object_id=row.id,
            ip=ip,
            user_agent=user_agent,
            metadata={"name": row.name, "before": {"status": "active"}, "after": {"status": "revoked"}},
        )
    return row


def resolve_pat(session: Session, plaintext: str) -> ResolvedToken | None:
    """The live token and its (active, still-member) owner, or None."""
    from openkb.security import hash_token

    if not plaintext or len(plaintext) > 200 or not looks_like_pat(plaintext):
        return None
    found = session.exec(
        select(McpPersonalAccessToken, User)  # type: ignore[call-overload]
        .join(User, User.id == McpPersonalAccessToken.user_id)
        .join(
            TenantMembership,
            (TenantMembership.user_id == McpPersonalAccessToken.user_id)
            & (TenantMembership.tenant_id == McpPersonalAccessToken.tenant_id),
        )
        .where(McpPersonalAccessToken.token_hash == hash_token(plaintext))
    ).first()
    if found is None:
        return None
    row, user = found
    now = utcnow()
    if row.status != "active" or row.revoked_at is not None or effective_status(row, now) != "active":
        return None
    if user.status != "active":
        return None
    if row.last_used_at is None or row.last_used_at < now - LAST_USED_EVERY:
        session.execute(
            text(
                "UPDATE mcp_personal_access_tokens SET last_used_at = now() WHERE id = :id "
                "AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')"
            ),
            {"id": row.id},
        )
    return ResolvedToken(row=row, user=user)


def principal_for(resolved: ResolvedToken) -> Principal:
    return Principal.user(resolved.user, resolved.row.tenant_id, scopes=frozenset(resolved.row.scopes))


# --- operator paths (``openkb token create|list|revoke --user``, docs/mcp.md#personal-access-tokens) ---

DEFAULT_SCOPES = ["kb:read", "kb:search", "doc:read"]  # doc:write is never a default


def _operator_target(session: Session, principal: Principal, user: str, tenant: str | None) -> tuple[User, uuid.UUID]:
    """The user (email or id) and the tenant the token binds to, if ``principal`` administers it.

    A user in several tenants needs ``tenant``: a token acts in exactly one (docs/accounts.md#personal-access-tokens).
    """
    from openkb.accounts.users import access_admin, find_user, get_tenant

    scope = access_admin(session, principal)
    u = find_user(session, user)
    tenants = list(session.exec(select(TenantMembership.tenant_id).where(TenantMembership.user_id == u.id)).all())
    if tenant is not None:
        tid = get_tenant(session, tenant).id
        if tid not in tenants:
            raise ValidationError(f"{u.email} is not a member of tenant {tenant}", field="tenant")
    elif len(tenants) == 1:
        tid = tenants[0]
    else:
        raise ValidationError(f"{u.email} belongs to {len(tenants)} tenants; name one with --tenant", field="tenant")
    if not scope.is_system_admin and scope.tenant_id != tid:
        raise NotFound(f"no user {user!r}")
    return u, tid


def operator_create_pat(
    session: Session,
    principal: Principal,
    *,
    user: str,
    name: str,
    scopes: list[str] | None = None,
    tenant: str | None = None,
    expires_at: datetime | None = None,
) -> tuple[McpPersonalAccessToken, str, User]:
    """Mint a token for another user (the operator at the shell, or a tenant admin for its
    tenant). Returns (row, plaintext, user); the plaintext is shown once. The token is bound to
    the user: it never reads more than the user may (no instance-wide tokens)."""
    u, tid = _operator_target(session, principal, user, tenant)
    if u.status != "active":
        raise ValidationError(
            f"{u.email} is {u.status}: a token would not work until the account is active", field="user"
        )
    name = (name or "").strip()
    if not name or len(name) > 1000:
        raise ValidationError("token name must be 1-1000 characters", field="name")
    scopes = validate_scopes(scopes if scopes is not None else DEFAULT_SCOPES)
    if expires_at is not None and (expires_at.tzinfo is None or expires_at <= utcnow()):
        raise ValidationError("expires_at must be a future time with a timezone", field="expires_at")
    row, plaintext = _insert(session, tenant_id=tid, user_id=u.id, name=name, scopes=scopes, expires_at=expires_at)
    record_audit(
        session,
        tenant_id=tid,
        actor=principal,
        action="pat.created",
        object_type="personal_access_token",
        object_id=row.id,
        metadata={"name": name, "scopes": scopes, "expires_at": expires_at, "user_id": u.id, "for_user": True},
    )
    return row, plaintext, u


def operator_list_pats(
    session: Session, principal: Principal, *, user: str, tenant: str | None = None
) -> tuple[User, list[McpPersonalAccessToken]]:
    u, _ = _operator_target(session, principal, user, tenant)
    rows = session.exec(
        select(McpPersonalAccessToken)
        .where(McpPersonalAccessToken.user_id == u.id)
        .order_by(McpPersonalAccessToken.created_at.desc())
    ).all()  # type: ignore[attr-defined]
    return u, list(rows)


def operator_revoke_pat(
    session: Session, principal: Principal, *, user: str, token_id: uuid.UUID, tenant: str | None = None
) -> McpPersonalAccessToken:
    """Revoke one of ``user``'s tokens; effective on the token's next request."""
    u, _ = _operator_target(session, principal, user, tenant)
    row = session.get(McpPersonalAccessToken, token_id)
    if row is None or row.user_id != u.id:
        raise NotFound("no such token")
    if row.status == "active":
        row.status = "revoked"
        row.revoked_at = utcnow()
        session.add(row)
        session.flush()
        record_audit(
            session,
            tenant_id=row.tenant_id,
            actor=principal,
            action="pat.revoked",
            object_type="personal_access_token",
            object_id=row.id,
            metadata={
                "name": row.name,
                "user_id": u.id,
                "before": {"status": "active"},
                "after": {"status": "revoked"},
            },
        )
    return row
