"""Access-token check for the resource server (``/mcp``): one indexed lookup, no cache.

An OAuth access token is an opaque ``kbat_...`` string; only its SHA-256 is stored
(``mcp_oauth_access_tokens.token_hash``, unique index), like PATs (``openkb/security.py``).
The check joins the token to its grant, the grant's user and the user's tenant membership in a
single statement, so revoking the grant, suspending the user or removing them from the tenant
stops the very next call (docs/oauth.md#tokens). Trap: never cache a positive answer in
process memory; another replica may have just revoked the grant.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import select
from sqlmodel import Session

from openkb.errors import Unauthenticated
from openkb.models import McpOAuthAccessToken, McpOAuthClient, McpOAuthGrant, TenantMembership, User
from openkb.models._base import utcnow
from openkb.permissions.principal import Principal
from openkb.security import hash_token

ACCESS_TOKEN_PREFIX = "kbat"
REFRESH_TOKEN_PREFIX = "kbrt"
CODE_PREFIX = "kbcode"
MAX_TOKEN_CHARS = 200


@dataclass(frozen=True)
class OAuthGrant:
    """What a valid access token resolves to: a real user in a real tenant, through one grant."""

    user_id: uuid.UUID
    tenant_id: uuid.UUID
    client_id: str  # the OAuth client_id (a DCR id or a metadata-document URL)
    scopes: frozenset[str]
    expires_at: datetime
    grant_id: uuid.UUID
    resource: str = ""
    client_name: str = ""
    token_id: uuid.UUID | None = None

    def principal(self) -> Principal:
        """The user, narrowed to the token's scopes (scopes never widen what the user may do)."""
        return Principal.user(self.user_id, self.tenant_id, scopes=self.scopes)


def looks_like_access_token(value: str) -> bool:
    return value.startswith(ACCESS_TOKEN_PREFIX + "_")


def verify_access_token(session: Session, token: str, *, resource: str) -> OAuthGrant:
    """The grant behind ``token`` if it is live and was minted for ``resource``; else raise
    ``Unauthenticated`` (unknown, expired, revoked grant, disabled client, another resource,
    user not active or no longer a member of the grant's tenant).

    ``resource`` is the canonical URL of the protected resource (``<APP_BASE_URL>/mcp``);
    compared exactly, minus a trailing slash (RFC 8707: tokens minted for another resource are
    refused).
    """
    if not token or len(token) > MAX_TOKEN_CHARS or not looks_like_access_token(token):
        raise Unauthenticated("the access token is invalid, expired or revoked")
    # Columns, not entities: no identity-map work on the hot path of every /mcp call.
    found = session.execute(
        select(
            McpOAuthAccessToken.id,
            McpOAuthAccessToken.scopes,
            McpOAuthAccessToken.resource,
            McpOAuthAccessToken.expires_at,
            McpOAuthGrant.id,
            McpOAuthGrant.user_id,
            McpOAuthGrant.tenant_id,
            McpOAuthGrant.status,
            McpOAuthGrant.expires_at,
            McpOAuthClient.client_id,
            McpOAuthClient.client_name,
            McpOAuthClient.status,
            User.status,
        )
        .join(McpOAuthGrant, McpOAuthGrant.id == McpOAuthAccessToken.grant_id)
        .join(McpOAuthClient, McpOAuthClient.id == McpOAuthGrant.client_id)
        .join(User, User.id == McpOAuthGrant.user_id)
        .join(
            TenantMembership,
            (TenantMembership.user_id == McpOAuthGrant.user_id)
            & (TenantMembership.tenant_id == McpOAuthGrant.tenant_id),
        )
        .where(McpOAuthAccessToken.token_hash == hash_token(token))
    ).first()
    if found is None:
        raise Unauthenticated("the access token is invalid, expired or revoked")
    return grant_from_columns(tuple(found), resource)


def grant_from_columns(found: tuple, resource: str) -> OAuthGrant:
    """The checks of ``verify_access_token`` on its 13 columns, in its select's order (token id,
    scopes, resource, expires_at; grant id, user_id, tenant_id, status, expires_at; client_id,
    client_name, status; user status), for a statement that reads them along with more (the
    apps API's caller, ``openkb.apps.oauth``). Trap: that statement must join the user's tenant
    membership as this one does."""
    (
        token_id,
        scopes,
        bound,
        expires_at,
        grant_id,
        user_id,
        tenant_id,
        grant_status,
        grant_expires_at,
        client_id,
        client_name,
        client_status,
        user_status,
    ) = found
    now = utcnow()
    if expires_at <= now:
        raise Unauthenticated("the access token has expired; refresh it")
    if grant_status != "active" or (grant_expires_at is not None and grant_expires_at <= now):
        raise Unauthenticated("the authorization behind this token was revoked")
    if client_status != "active":
        raise Unauthenticated("the OAuth client of this token is disabled")
    if user_status != "active":
        raise Unauthenticated("the account behind this token is not active")
    if canonical_resource(bound) != canonical_resource(resource):
        raise Unauthenticated("the access token was issued for another resource")
    return OAuthGrant(
        user_id=user_id,
        tenant_id=tenant_id,
        client_id=client_id,
        scopes=frozenset(scopes),
        expires_at=expires_at,
        grant_id=grant_id,
        resource=bound,
        client_name=client_name,
        token_id=token_id,
    )


def canonical_resource(url: str) -> str:
    """RFC 8707 / MCP canonical form: scheme and host lower-cased, no fragment, no trailing slash
    (``HTTPS://KB.example.com/mcp/`` == ``https://kb.example.com/mcp``)."""
    parts = urlsplit((url or "").strip())
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), parts.query, ""))
