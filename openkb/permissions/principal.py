"""Who is asking: the one identity type every permission decision takes.

A ``Principal`` is a plain, immutable value built by the adapter that authenticated the caller
(session cookie, PAT, share-link visit, Dify key, background job). The permission service never
trusts anything in it beyond identity: roles, memberships, link validity and key status are read
from PostgreSQL on every decision, so a revoked grant or link stops working on the next call.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from openkb.errors import Unauthenticated

if TYPE_CHECKING:
    from openkb.models import DifyApiKey, ShareLink, User

PrincipalKind = Literal["user", "anonymous", "share_link", "dify_key", "system"]

# Token scopes (docs/accounts.md#scopes). A principal with ``scopes=None`` (a browser session) has all of them.
READ_SCOPES = frozenset({"kb:read", "kb:search", "doc:read"})
# Write tools are "later, separately authorised" (docs/accounts.md#scopes): a token needs one of these to
# edit, manage or share anything.
WRITE_SCOPES = frozenset({"kb:write", "doc:write"})


def _uuid(value: uuid.UUID | str) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


@dataclass(frozen=True, slots=True)
class Principal:
    kind: PrincipalKind
    tenant_id: uuid.UUID | None
    user_id: uuid.UUID | None = None
    share_link_id: uuid.UUID | None = None
    dify_key_id: uuid.UUID | None = None
    allowed_kb_ids: frozenset[uuid.UUID] | None = None
    scopes: frozenset[str] | None = None

    # -- constructors -------------------------------------------------------------------------

    @classmethod
    def user(
        cls,
        user: User | uuid.UUID | str,
        tenant_id: uuid.UUID | str,
        *,
        scopes: frozenset[str] | set[str] | list[str] | None = None,
    ) -> Principal:
        """A logged-in user acting in ``tenant_id``; ``scopes`` narrows a PAT/OAuth token."""
        uid = user.id if hasattr(user, "id") else _uuid(user)  # type: ignore[union-attr]
        return cls(
            kind="user", tenant_id=_uuid(tenant_id), user_id=uid, scopes=None if scopes is None else frozenset(scopes)
        )

    @classmethod
    def anonymous(cls, tenant_id: uuid.UUID | str | None = None) -> Principal:
        """Nobody logged in. Reads published content of ``public`` places only."""
        return cls(kind="anonymous", tenant_id=None if tenant_id is None else _uuid(tenant_id))

    @classmethod
    def share_link(cls, link: ShareLink, *, user_id: uuid.UUID | str | None = None) -> Principal:
        """A visitor who passed a share link's checks (token, password, login, membership).

        Trap: building this directly skips the password check. Only
        ``openkb.permissions.share_links.open_share_link`` should call it. Revocation, expiry,
        require_login and restrict_to_workspace_members are re-checked on every decision.
        """
        return cls(
            kind="share_link",
            tenant_id=link.tenant_id,
            share_link_id=link.id,
            user_id=None if user_id is None else _uuid(user_id),
        )

    @classmethod
    def dify(cls, key: DifyApiKey) -> Principal:
        """A Dify app key: reads only its knowledge bases, never as any user (docs/permissions.md#dify-keys)."""
        now = datetime.now(UTC)
        if key.status != "active" or (key.expires_at is not None and key.expires_at <= now):
            raise Unauthenticated("the API key is not active")
        return cls(
            kind="dify_key",
            tenant_id=key.tenant_id,
            dify_key_id=key.id,
            allowed_kb_ids=frozenset(_uuid(k) for k in key.allowed_knowledge_base_ids),
        )

    @classmethod
    def system(cls) -> Principal:
        """Background jobs (indexer, rebuild) and the operator at the command line, who
        administers every tenant (``openkb.accounts.users.access_admin``). Reads everything;
        never use for a user-facing read, and never build one from a request."""
        return cls(kind="system", tenant_id=None)

    # -- helpers ------------------------------------------------------------------------------

    @property
    def is_user(self) -> bool:
        return self.kind == "user"

    def has_read_scope(self) -> bool:
        return self.scopes is None or bool(self.scopes & READ_SCOPES)

    def has_write_scope(self) -> bool:
        return self.scopes is None or bool(self.scopes & WRITE_SCOPES)

    def __repr__(self) -> str:  # short, for test failure output and logs
        bits = [self.kind]
        if self.user_id:
            bits.append(f"user={str(self.user_id)[:8]}")
        if self.share_link_id:
            bits.append(f"link={str(self.share_link_id)[:8]}")
        if self.dify_key_id:
            bits.append(f"dify={str(self.dify_key_id)[:8]}")
        if self.scopes is not None:
            bits.append(f"scopes={sorted(self.scopes)}")
        return f"Principal({', '.join(bits)})"
