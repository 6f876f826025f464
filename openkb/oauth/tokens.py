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

from sqlalchemy import text
from sqlmodel import Session

from openkb.errors import Unauthenticated
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


# The grant's ``last_used_at`` (what the user's connected applications and the admin console show)
# at most once a minute, in the statement that reads the token: a data-modifying CTE runs whether
# or not the SELECT refers to it and writes only when the stamp is a minute old, so a call pays no
# write of its own. ``SKIP LOCKED``: a concurrent call holding the row is stamping the same
# minute. Trap: the stamp belongs to the call's transaction, so a refused call (expired, another
# resource), which rolls back, does not count as a use. Also read by the apps API's caller
# statement (``openkb.apps.oauth``).
GRANT_TOUCH = """WITH touched AS (
    UPDATE mcp_oauth_grants SET last_used_at = now()
    WHERE id IN (SELECT g.id FROM mcp_oauth_access_tokens t JOIN mcp_oauth_grants g ON g.id = t.grant_id
                 WHERE t.token_hash = :h AND g.status = 'active'
                   AND (g.last_used_at IS NULL OR g.last_used_at < now() - interval '1 minute')
                 FOR UPDATE OF g SKIP LOCKED)
    RETURNING id
)
"""
# What ``grant_from_columns`` checks, in its order, and the joins that reach it from the token
# ``t`` (grant ``g``, client ``oc``, the user's membership ``m`` of the grant's tenant); the user
# ``u`` is joined by the statement (the apps API's caller statement reaches it through the
# installation). Written once, for ``/mcp`` here and for the apps API (``openkb.apps.oauth``).
GRANT_CHECKED = (
    "t.id", "t.scopes", "t.resource", "t.expires_at", "g.id", "g.user_id", "g.tenant_id", "g.status", "g.expires_at",
    "oc.client_id", "oc.client_name", "oc.status", "u.status",
)  # fmt: skip
GRANT_SOURCE = """mcp_oauth_access_tokens t
JOIN mcp_oauth_grants g ON g.id = t.grant_id
JOIN mcp_oauth_clients oc ON oc.id = g.client_id
JOIN tenant_memberships m ON m.user_id = g.user_id AND m.tenant_id = g.tenant_id"""
_VERIFY = text(
    f"{GRANT_TOUCH}SELECT {', '.join(GRANT_CHECKED)}\nFROM {GRANT_SOURCE}\n"
    "JOIN users u ON u.id = g.user_id\nWHERE t.token_hash = :h"
)


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
    # Columns, not entities: no identity-map work on the hot path of every /mcp call; the grant's
    # ``last_used_at`` is stamped by the same statement (``GRANT_TOUCH``).
    found = session.execute(_VERIFY, {"h": hash_token(token)}).first()
    if found is None:
        raise Unauthenticated("the access token is invalid, expired or revoked")
    return grant_from_columns(tuple(found), resource)


def grant_from_columns(found: tuple, resource: str) -> OAuthGrant:
    """The checks of ``verify_access_token`` on the ``GRANT_CHECKED`` columns, in that order, for
    any statement that reads them from ``GRANT_SOURCE`` (with the user as ``u``), alone or along
    with more (the apps API's caller, ``openkb.apps.oauth``)."""
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
