"""Share links (docs/permissions.md#share-links): read-only, always.

``permission`` is 'view' by a CHECK constraint and by ``create_share_link`` refusing anything
else. A link opens its object and what inherits from it, published content only, for as long as
it is not revoked or expired; a knowledge-base link opens its tree. Tokens are stored as
SHA-256, passwords as argon2id.

Trap: a wrong password must be *counted* (rate limit) and *audited* although the request then
fails, and the failure rolls the request's unit of work back. ``open_share_link`` therefore
writes those records with ``openkb.db.record_then_refuse`` (their own, committed transaction)
and then raises; recording them in the request's transaction would make brute force free.
A missing password writes nothing and is returned as ``password_required`` (a share-access
token may stand in for it, see ``openkb.content.share_view.open_link``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NoReturn

from sqlalchemy import select
from sqlmodel import Session

from openkb import ratelimit
from openkb.audit import record_audit
from openkb.db import commit_apart, record_then_refuse
from openkb.errors import (
    NotFound,
    PermissionDenied,
    RateLimited,
    SharePasswordIncorrect,
    SharePasswordRequired,
    Unauthenticated,
    ValidationError,
)
from openkb.models import ShareLink
from openkb.permissions import rules
from openkb.permissions.guards import authorize, content_ref
from openkb.permissions.loader import load_snapshot
from openkb.permissions.principal import Principal
from openkb.security import hash_password, hash_token, new_token, verify_password

TOKEN_PREFIX = "kbshare"
# Failed password attempts: per link and visitor, and per link overall (slows distributed guessing).
PASSWORD_FAILURES_PER_VISITOR = (5, 15 * 60)
PASSWORD_FAILURES_PER_LINK = (50, 60 * 60)


@dataclass(frozen=True)
class CreatedShareLink:
    link: ShareLink
    token: str  # plaintext, shown once


@dataclass(frozen=True)
class ShareLinkAccess:
    status: Literal["ok", "password_required"]
    link: ShareLink
    principal: Principal | None = None

    def raise_for_status(self) -> Principal:
        """The visitor principal, or SHARE_PASSWORD_REQUIRED."""
        if self.status == "ok" and self.principal is not None:
            return self.principal
        raise SharePasswordRequired("this link needs a password")


MIN_LINK_PASSWORD = 4


def _now() -> datetime:
    return datetime.now(UTC)


def create_share_link(
    session: Session,
    principal: Principal,
    obj: Any,
    *,
    permission: str = "view",
    password: str | None = None,
    require_login: bool = False,
    restrict_to_workspace_members: bool = False,
    expires_at: datetime | None = None,
    ip: str | None = None,
    user_agent: str | None = None,
) -> CreatedShareLink:
    if permission != "view":
        raise ValidationError("share links are read-only: permission must be 'view'")
    ref = content_ref(obj)
    if expires_at is not None and (expires_at.tzinfo is None or expires_at <= _now()):
        raise ValidationError("expires_at must be a future, timezone-aware time")
    if password and len(password) < MIN_LINK_PASSWORD:
        # guesses are limited (50 per link per hour), which only protects a password with room
        # in it: one character falls in two hours, four in decades (docs/permissions.md#share-links)
        raise ValidationError(
            f"a share link's password needs at least {MIN_LINK_PASSWORD} characters", field="password"
        )
    auth = authorize(session, principal, ref, "share")
    plaintext, digest = new_token(TOKEN_PREFIX)
    link = ShareLink(
        tenant_id=auth.tenant_id,
        object_type=ref.object_type,
        object_id=ref.object_id,
        token_hash=digest,
        permission="view",
        password_hash=hash_password(password) if password else None,
        require_login=require_login,
        restrict_to_workspace_members=restrict_to_workspace_members,
        expires_at=expires_at,
        created_by=principal.user_id,
    )
    session.add(link)
    session.flush()
    record_audit(
        session,
        tenant_id=auth.tenant_id,
        actor=principal,
        action="share_link.create",
        object_type=ref.object_type,
        object_id=ref.object_id,
        ip=ip,
        user_agent=user_agent,
        metadata={
            "share_link_id": link.id,
            "after": {
                "permission": "view",
                "has_password": bool(password),
                "require_login": require_login,
                "restrict_to_workspace_members": restrict_to_workspace_members,
                "expires_at": expires_at,
            },
        },
    )
    return CreatedShareLink(link, plaintext)


def _live_link(session: Session, token: str) -> ShareLink:
    link = session.execute(select(ShareLink).where(ShareLink.token_hash == hash_token(token))).scalar_one_or_none()
    if link is None or link.revoked_at is not None or (link.expires_at is not None and link.expires_at <= _now()):
        raise NotFound("share link not found")
    return link


def open_share_link(
    session: Session,
    token: str,
    *,
    password: str | None = None,
    viewer: Principal | None = None,
    ip: str | None = None,
    user_agent: str | None = None,
) -> ShareLinkAccess:
    """Check a visit; on success the returned principal reads the linked subtree.

    Raises NotFound (unknown, revoked or expired: indistinguishable), Unauthenticated
    (``require_login`` and nobody logged in), PermissionDenied (logged in but not allowed, e.g.
    not a workspace member), SharePasswordIncorrect and RateLimited (both recorded first, see the
    module docstring). No password for a protected link is returned as ``password_required``.
    """
    link = _live_link(session, token)
    user_id = viewer.user_id if viewer is not None and viewer.kind == "user" else None
    if (link.require_login or link.restrict_to_workspace_members) and user_id is None:
        raise Unauthenticated("log in to open this link")
    candidate = Principal.share_link(link, user_id=user_id)
    if user_id is not None or link.require_login or link.restrict_to_workspace_members:
        snap = load_snapshot(session, candidate)
        if not rules.link_usable(snap.viewer):
            if link.restrict_to_workspace_members or link.require_login:
                raise PermissionDenied(
                    "this link is for members of its workspace only"
                    if link.restrict_to_workspace_members
                    else "this link needs an active account"
                )
            candidate = Principal.share_link(link)  # logged-in but inactive visitor: open as anonymous
    audit_ctx = {
        "tenant_id": link.tenant_id,
        "object_type": link.object_type,
        "object_id": link.object_id,
        "ip": ip,
        "user_agent": user_agent,
    }

    def refuse(action: str, error: Exception) -> NoReturn:
        """Audit the refusal (committed apart: the error rolls the request back), then raise."""
        record_then_refuse(
            session,
            lambda s: record_audit(s, actor=candidate, action=action, metadata={"share_link_id": link.id}, **audit_ctx),
            error,
        )

    def rate_limited() -> NoReturn:
        refuse("share_link.password_rate_limited", RateLimited("too many wrong passwords, try again later"))

    if link.password_hash:
        visitor = str(user_id) if user_id else (ip or "unknown")
        k_visitor = f"share-password:{link.id}:{visitor}"
        k_link = f"share-password:{link.id}"
        if ratelimit.exceeded(session, k_visitor, *PASSWORD_FAILURES_PER_VISITOR) or ratelimit.exceeded(
            session, k_link, *PASSWORD_FAILURES_PER_LINK
        ):
            rate_limited()
        if not password:
            return ShareLinkAccess("password_required", link)

        def book(s: Session) -> bool:
            # Counted *before* the password is checked, committed apart: a burst of parallel
            # guesses otherwise all passed the peek above before any failure was counted (the
            # same race as sign-in's, docs/permissions.md#share-links). ``hit`` is one atomic
            # upsert, so each concurrent attempt sees its own count.
            return all(
                [
                    ratelimit.hit(s, k_visitor, *PASSWORD_FAILURES_PER_VISITOR),
                    ratelimit.hit(s, k_link, *PASSWORD_FAILURES_PER_LINK),
                ]
            )

        if not commit_apart(session, book):
            rate_limited()
        if not verify_password(link.password_hash, password):
            refuse("share_link.password_failed", SharePasswordIncorrect("wrong password"))  # stays counted

        def give_back(s: Session) -> None:  # the right password: only failures count
            ratelimit.give_back(s, k_visitor, PASSWORD_FAILURES_PER_VISITOR[1])
            ratelimit.give_back(s, k_link, PASSWORD_FAILURES_PER_LINK[1])

        commit_apart(session, give_back)
    record_audit(session, actor=candidate, action="share_link.open", metadata={"share_link_id": link.id}, **audit_ctx)
    return ShareLinkAccess("ok", link, candidate)


def list_share_links(session: Session, principal: Principal, obj: Any) -> list[ShareLink]:
    ref = content_ref(obj)
    authorize(session, principal, ref, "share")
    return list(
        session.execute(
            select(ShareLink)
            .where(
                ShareLink.object_type == ref.object_type,
                ShareLink.object_id == ref.object_id,
            )
            .order_by(ShareLink.created_at)
        ).scalars()
    )


def revoke_share_link(
    session: Session, principal: Principal, link_id: uuid.UUID, *, ip: str | None = None, user_agent: str | None = None
) -> ShareLink:
    """Close a link: its creator or anyone who may share the object. Takes effect at once."""
    link = session.get(ShareLink, link_id)
    if link is None or link.tenant_id != principal.tenant_id:
        raise NotFound("share link not found")
    ref = content_ref((link.object_type, link.object_id))
    if principal.kind == "user" and principal.user_id == link.created_by and principal.has_write_scope():
        authorize(session, principal, ref, "read")
    else:
        authorize(session, principal, ref, "share")
    if link.revoked_at is None:
        link.revoked_at = _now()
        session.add(link)
        session.flush()
        record_audit(
            session,
            tenant_id=link.tenant_id,
            actor=principal,
            action="share_link.revoke",
            object_type=link.object_type,
            object_id=link.object_id,
            ip=ip,
            user_agent=user_agent,
            metadata={
                "share_link_id": link.id,
                "before": {"revoked_at": None},
                "after": {"revoked_at": link.revoked_at},
            },
        )
    return link
