"""Grants, authorization codes and tokens of the MCP authorization server (docs/oauth.md#flow).

A grant is one user's consent for one client in one tenant, with the scopes consented to; it
is what "remember consent" looks up and what a user revokes. Every code, access token and
refresh token hangs off a grant, so revoking it (or detecting refresh-token reuse) ends them all.

* Codes: single use, ``CODE_TTL``, bound to the redirect URI, the PKCE S256 challenge and the
  RFC 8707 resource. A second exchange of a code revokes its grant (RFC 6749 §4.1.2).
* Access tokens: opaque, ``oauth_access_token_ttl_seconds``; checked by ``tokens.verify_access_token``.
* Refresh tokens: rotated on every use. Presenting a rotated one again means it leaked (or the
  client is confused): the whole grant is revoked and the refusal is committed apart
  (``openkb.db.record_then_refuse``), or the rollback of the refused request would undo it.

Only SHA-256 hashes of codes and tokens are stored (``openkb/security.py``).
"""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, update
from sqlmodel import Session, select

from openkb.audit import record_audit
from openkb.db import record_then_refuse
from openkb.errors import NotFound, OAuthProtocolError, Unauthenticated
from openkb.models import (
    AppInstallation,
    McpOAuthAccessToken,
    McpOAuthAuthorizationCode,
    McpOAuthClient,
    McpOAuthGrant,
    McpOAuthRefreshToken,
    User,
)
from openkb.models._base import utcnow
from openkb.oauth.clients import same_origin
from openkb.oauth.tokens import (
    ACCESS_TOKEN_PREFIX,
    CODE_PREFIX,
    REFRESH_TOKEN_PREFIX,
    canonical_resource,
)
from openkb.permissions.principal import Principal
from openkb.security import hash_token, new_token, tokens_equal

CODE_TTL = timedelta(minutes=5)
_PKCE = re.compile(r"^[A-Za-z0-9\-._~]{43,128}$")
_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")


@dataclass(frozen=True)
class TokenSet:
    access_token: str
    refresh_token: str
    expires_in: int
    scopes: list[str]
    grant_id: uuid.UUID

    def response(self) -> dict[str, Any]:
        """The RFC 6749 §5.1 token response body."""
        return {
            "access_token": self.access_token,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "refresh_token": self.refresh_token,
            "scope": " ".join(self.scopes),
        }


def check_code_challenge(challenge: Any, method: Any) -> str:
    """PKCE is required and only S256 is accepted (``plain`` would hand the verifier to anyone
    who sees the authorization request)."""
    if not challenge:
        raise OAuthProtocolError("invalid_request", "code_challenge is required (PKCE S256)")
    if method != "S256":
        raise OAuthProtocolError("invalid_request", "code_challenge_method must be S256")
    if not isinstance(challenge, str) or not _CHALLENGE.match(challenge):
        raise OAuthProtocolError("invalid_request", "code_challenge must be a base64url SHA-256 (43 characters)")
    return challenge


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode("ascii")


def check_resource(resource: Any, expected: str) -> str:
    """RFC 8707: the resource the token is for. Another resource is ``invalid_target``; an
    omitted one means the only resource this server issues tokens for (RFC 8707 §2 lets the
    server pick a default), bound into the code and tokens all the same. Trap: requiring it
    fails clients that still omit it (Codex did), for no gain: the binding is what matters."""
    if resource is None or resource == "":
        return canonical_resource(expected)
    if not isinstance(resource, str) or canonical_resource(resource) != canonical_resource(expected):
        raise OAuthProtocolError(
            "invalid_target", f"unknown resource {str(resource)[:200]!r}; this server issues tokens for {expected}"
        )
    return canonical_resource(expected)


# --- clients of an app installation (docs/apps.md#oauth) ----------------------------------------

APPS_SCOPE = "apps"  # the one scope of an installation's client: act as the installation


def check_scopes_for(client: McpOAuthClient, scope: Any) -> list[str] | None:
    """An installation's client asks for ``apps`` (or nothing, meaning it); anything else is
    ``invalid_scope``. None for other clients (their scopes are checked as before).
    Trap: ``apps`` is not in ``clients.SCOPES``, so no MCP client can ever be granted it."""
    if client.installation_id is None:
        return None
    asked = set(str(scope or "").split()) - {"offline_access"}
    if asked - {APPS_SCOPE}:
        raise OAuthProtocolError("invalid_scope", f"an app installation's client may only ask for {APPS_SCOPE}")
    return [APPS_SCOPE]


def check_installation_user(session: Session, client: McpOAuthClient, principal: Principal) -> None:
    """Only the installation's own user may authorize its client, and only while it is
    installed: anyone else consenting would hand the app *their* knowledge under the other
    user's installation. No-op for MCP clients."""
    if client.installation_id is None:
        return
    inst = session.get(AppInstallation, client.installation_id)
    if inst is None or inst.status != "active":
        raise OAuthProtocolError("access_denied", "this app is no longer installed", status=403)
    if inst.user_id != principal.user_id or inst.tenant_id != principal.tenant_id:
        raise OAuthProtocolError(
            "access_denied",
            "this app installation belongs to another account; only its owner may authorize it",
            status=403,
        )


# --- consent and codes ---------------------------------------------------------------------------


def _active_grant(
    session: Session, user_id: uuid.UUID, tenant_id: uuid.UUID, client: McpOAuthClient, *, lock: bool = False
) -> McpOAuthGrant | None:
    q = (
        select(McpOAuthGrant)
        .where(
            McpOAuthGrant.user_id == user_id,
            McpOAuthGrant.tenant_id == tenant_id,
            McpOAuthGrant.client_id == client.id,
            McpOAuthGrant.status == "active",
        )
        .order_by(McpOAuthGrant.created_at.desc())
    )  # type: ignore[attr-defined]
    if lock:
        q = q.with_for_update()
    return session.exec(q).first()


def redirect_trusted(session: Session, client: McpOAuthClient, redirect_uri: str, principal: Principal | None) -> bool:
    """Whether an error or a denial of an authorization request may be sent to ``redirect_uri``
    without the user clicking anything (RFC 9700 §4.11.2; docs/oauth.md#the-authorize-page).

    Registration is open to anyone (``POST /oauth/register`` is unauthenticated) and takes any
    https or private-scheme redirect URI, so a registered URI proves nothing: redirecting to it
    at once would make ``/oauth/authorize`` an open redirect on the knowledge base's own domain
    (a link there lands on the attacker's page, or launches an OS handler, with no sign-in). It
    is trusted only when

    * the client is a Client ID Metadata Document whose redirect URI is on the document's own
      origin: whoever serves the client_id URL controls where it redirects; or
    * the signed-in user already authorized this client (an active grant): they chose to trust it.

    Otherwise the caller shows its own page with a link the user may follow.
    """
    if client.registration == "cimd" and same_origin(client.client_id, redirect_uri):
        return True
    if principal is None or principal.user_id is None or principal.tenant_id is None:
        return False
    return _active_grant(session, principal.user_id, principal.tenant_id, client) is not None


def remembered_grant(
    session: Session, principal: Principal, client: McpOAuthClient, scopes: list[str]
) -> McpOAuthGrant | None:
    """The user's active grant for this client if it already covers ``scopes`` (consent is not
    asked again); None when consent is needed (first time, or new scopes)."""
    if principal.user_id is None or principal.tenant_id is None:
        return None
    grant = _active_grant(session, principal.user_id, principal.tenant_id, client)
    if grant is not None and set(scopes) <= set(grant.scopes):
        return grant
    return None


def consent(
    session: Session, principal: Principal, client: McpOAuthClient, scopes: list[str], *, redirect_uri: str
) -> McpOAuthGrant:
    """The user approved ``scopes`` for ``client``: extend their active grant, or open one."""
    if not principal.is_user or principal.user_id is None or principal.tenant_id is None:
        raise Unauthenticated("sign in to authorize an application")
    check_installation_user(session, principal=principal, client=client)
    grant = _active_grant(session, principal.user_id, principal.tenant_id, client, lock=True)
    if grant is None:
        grant = McpOAuthGrant(
            tenant_id=principal.tenant_id,
            user_id=principal.user_id,
            client_id=client.id,
            scopes=sorted(set(scopes)),
            status="active",
        )
        before: list[str] = []
    else:
        before = list(grant.scopes)
        grant.scopes = sorted(set(grant.scopes) | set(scopes))
    session.add(grant)
    session.flush()
    if grant.scopes != before:
        record_audit(
            session,
            tenant_id=grant.tenant_id,
            actor=principal,
            action="oauth.grant_issued",
            object_type="oauth_grant",
            object_id=grant.id,
            metadata={
                "client_id": client.client_id,
                "client_name": client.client_name,
                "scopes": grant.scopes,
                "before": {"scopes": before},
                "redirect_uri": redirect_uri,
            },
        )
    return grant


def issue_code(
    session: Session, grant: McpOAuthGrant, *, redirect_uri: str, scopes: list[str], code_challenge: str, resource: str
) -> str:
    """A single-use code (plaintext returned once; its hash stored) for the redirect."""
    plaintext, code_hash = new_token(CODE_PREFIX)
    # Expired codes of this grant can no longer be exchanged nor replayed: drop them here.
    session.execute(
        delete(McpOAuthAuthorizationCode).where(
            McpOAuthAuthorizationCode.grant_id == grant.id,  # type: ignore[arg-type]
            McpOAuthAuthorizationCode.expires_at <= utcnow(),
        )
    )  # type: ignore[arg-type]
    session.add(
        McpOAuthAuthorizationCode(
            tenant_id=grant.tenant_id,
            grant_id=grant.id,
            code_hash=code_hash,
            redirect_uri=redirect_uri,
            scopes=sorted(scopes),
            code_challenge=code_challenge,
            resource=resource,
            expires_at=utcnow() + CODE_TTL,
        )
    )
    session.flush()
    return plaintext


# --- tokens ---------------------------------------------------------------------------------------


def _mint(session: Session, settings: Any, grant: McpOAuthGrant, scopes: list[str], resource: str) -> TokenSet:
    now = utcnow()
    access, access_hash = new_token(ACCESS_TOKEN_PREFIX)
    refresh, refresh_hash = new_token(REFRESH_TOKEN_PREFIX)
    ttl = int(settings.oauth_access_token_ttl_seconds)
    # Expired tokens of this grant are dead weight in the lookup indexes: drop them here (no
    # sweeper job needed; a grant that is never used again keeps only its last, unexpired pair).
    session.execute(
        delete(McpOAuthAccessToken).where(
            McpOAuthAccessToken.grant_id == grant.id,  # type: ignore[arg-type]
            McpOAuthAccessToken.expires_at <= now,
        )
    )  # type: ignore[arg-type]
    session.execute(
        delete(McpOAuthRefreshToken).where(
            McpOAuthRefreshToken.grant_id == grant.id,  # type: ignore[arg-type]
            McpOAuthRefreshToken.expires_at <= now,
        )
    )  # type: ignore[arg-type]
    session.add(
        McpOAuthAccessToken(
            tenant_id=grant.tenant_id,
            grant_id=grant.id,
            token_hash=access_hash,
            scopes=sorted(scopes),
            resource=resource,
            expires_at=now + timedelta(seconds=ttl),
        )
    )
    session.add(
        McpOAuthRefreshToken(
            tenant_id=grant.tenant_id,
            grant_id=grant.id,
            token_hash=refresh_hash,
            scopes=sorted(scopes),
            resource=resource,
            expires_at=now + timedelta(days=int(settings.oauth_refresh_token_ttl_days)),
        )
    )
    grant.last_used_at = now
    session.add(grant)
    session.flush()
    return TokenSet(
        access_token=access, refresh_token=refresh, expires_in=ttl, scopes=sorted(scopes), grant_id=grant.id
    )


def _live_grant(session: Session, grant_id: uuid.UUID, client_id: str) -> tuple[McpOAuthGrant, McpOAuthClient]:
    """The grant and its client, if the grant is active, belongs to ``client_id``, its client is
    active and its user still active; else ``invalid_grant`` (the same words for each)."""
    found = session.exec(
        select(McpOAuthGrant, McpOAuthClient, User.status)  # type: ignore[call-overload]
        .join(McpOAuthClient, McpOAuthClient.id == McpOAuthGrant.client_id)
        .join(User, User.id == McpOAuthGrant.user_id)
        .where(McpOAuthGrant.id == grant_id)
    ).first()
    if found is None:
        raise OAuthProtocolError("invalid_grant", "the grant no longer exists")
    grant, client, user_status = found
    if client.client_id != client_id:
        raise OAuthProtocolError("invalid_grant", "this code or token was issued to another client")
    if grant.status != "active" or client.status != "active":
        raise OAuthProtocolError("invalid_grant", "the authorization was revoked")
    if user_status != "active":
        raise OAuthProtocolError("invalid_grant", "the account behind this authorization is not active")
    if client.installation_id is not None:  # uninstalled since: no new tokens (docs/apps.md#oauth)
        inst = session.get(AppInstallation, client.installation_id)
        if inst is None or inst.status != "active" or inst.user_id != grant.user_id:
            raise OAuthProtocolError("invalid_grant", "the app installation behind this authorization is gone")
    return grant, client


def _revoke_rows(session: Session, grant_id: uuid.UUID, now: datetime) -> int:
    """Revoke a grant and everything minted from it; returns 1 if the grant was still active."""
    res = session.execute(
        update(McpOAuthGrant)
        .where(McpOAuthGrant.id == grant_id, McpOAuthGrant.status == "active")  # type: ignore[arg-type]
        .values(status="revoked", revoked_at=now)
    )
    session.execute(
        update(McpOAuthRefreshToken)
        .where(
            McpOAuthRefreshToken.grant_id == grant_id,  # type: ignore[arg-type]
            McpOAuthRefreshToken.revoked_at.is_(None),
        )  # type: ignore[union-attr]
        .values(revoked_at=now)
    )
    session.execute(delete(McpOAuthAccessToken).where(McpOAuthAccessToken.grant_id == grant_id))  # type: ignore[arg-type]
    return int(res.rowcount or 0)  # type: ignore[attr-defined]


def _refuse_and_revoke(
    session: Session, grant_id: uuid.UUID, *, action: str, client_id: str, error: OAuthProtocolError
) -> None:
    """Revoke the grant in a transaction of its own, audit why, then raise ``error``."""
    grant = session.get(McpOAuthGrant, grant_id)
    tenant_id, user_id = (grant.tenant_id, grant.user_id) if grant is not None else (None, None)

    def record(s: Session) -> None:
        if _revoke_rows(s, grant_id, utcnow()):
            record_audit(
                s,
                tenant_id=tenant_id,
                actor=Principal.user(user_id, tenant_id) if user_id else None,
                action=action,
                object_type="oauth_grant",
                object_id=grant_id,
                metadata={"client_id": client_id, "before": {"status": "active"}, "after": {"status": "revoked"}},
            )

    record_then_refuse(session, record, error)


def exchange_code(
    session: Session, settings: Any, *, code: Any, client_id: Any, redirect_uri: Any, code_verifier: Any, resource: Any
) -> TokenSet:
    """``grant_type=authorization_code``: check the code (unused, fresh, same client and
    redirect URI, PKCE S256, same resource) and mint the first access + refresh tokens."""
    if not isinstance(code, str) or not code or len(code) > 200:
        raise OAuthProtocolError("invalid_request", "code is required")
    if not isinstance(client_id, str) or not client_id:
        raise OAuthProtocolError("invalid_request", "client_id is required (public clients send it in the form)")
    if not isinstance(code_verifier, str) or not _PKCE.match(code_verifier):
        raise OAuthProtocolError("invalid_request", "code_verifier is required: 43-128 characters [A-Za-z0-9-._~]")
    row = session.exec(
        select(McpOAuthAuthorizationCode)
        .where(McpOAuthAuthorizationCode.code_hash == hash_token(code))
        .with_for_update()
    ).first()
    if row is None:
        raise OAuthProtocolError("invalid_grant", "unknown or expired authorization code")
    if row.consumed_at is not None:
        _refuse_and_revoke(
            session,
            row.grant_id,
            action="oauth.code_reuse_detected",
            client_id=client_id,
            error=OAuthProtocolError(
                "invalid_grant", "authorization code was already used; the authorization is revoked"
            ),
        )
    if row.expires_at <= utcnow():
        raise OAuthProtocolError("invalid_grant", "unknown or expired authorization code")
    grant, _client = _live_grant(session, row.grant_id, client_id)
    if redirect_uri is not None and redirect_uri != row.redirect_uri:
        raise OAuthProtocolError("invalid_grant", "redirect_uri differs from the authorization request's")
    if not row.code_challenge or not tokens_equal(s256(code_verifier), row.code_challenge):
        raise OAuthProtocolError("invalid_grant", "code_verifier does not match the code_challenge (PKCE S256)")
    bound = row.resource or ""
    if resource is not None and canonical_resource(str(resource)) != canonical_resource(bound):
        raise OAuthProtocolError("invalid_target", "resource differs from the authorization request's")
    row.consumed_at = utcnow()
    session.add(row)
    return _mint(session, settings, grant, list(row.scopes), bound)


def refresh(
    session: Session, settings: Any, *, refresh_token: Any, client_id: Any, scope: Any, resource: Any
) -> TokenSet:
    """``grant_type=refresh_token``: rotate. A rotated (revoked) token presented again while its
    grant is active is reuse: the grant is revoked (committed apart) and ``invalid_grant`` raised.

    Trap: the reuse check reads without a lock, so the revocation's separate transaction does
    not wait on a row this request holds; the lock is taken only on the live path.
    """
    if not isinstance(refresh_token, str) or not refresh_token or len(refresh_token) > 200:
        raise OAuthProtocolError("invalid_request", "refresh_token is required")
    if not isinstance(client_id, str) or not client_id:
        raise OAuthProtocolError("invalid_request", "client_id is required (public clients send it in the form)")
    token_hash = hash_token(refresh_token)
    row = session.exec(select(McpOAuthRefreshToken).where(McpOAuthRefreshToken.token_hash == token_hash)).first()
    if row is None:
        raise OAuthProtocolError("invalid_grant", "unknown refresh token")
    if row.revoked_at is not None:
        grant = session.get(McpOAuthGrant, row.grant_id)
        if grant is not None and grant.status == "active":
            _refuse_and_revoke(
                session,
                row.grant_id,
                action="oauth.refresh_reuse_detected",
                client_id=client_id,
                error=OAuthProtocolError(
                    "invalid_grant", "refresh token was already used; the authorization is revoked, sign in again"
                ),
            )
        raise OAuthProtocolError("invalid_grant", "the refresh token was revoked")
    row = session.exec(select(McpOAuthRefreshToken).where(McpOAuthRefreshToken.id == row.id).with_for_update()).one()
    session.refresh(row)
    if row.revoked_at is not None:  # a concurrent refresh won the race
        raise OAuthProtocolError("invalid_grant", "the refresh token was already used")
    if row.expires_at <= utcnow():
        raise OAuthProtocolError("invalid_grant", "the refresh token has expired; authorize again")
    grant, client = _live_grant(session, row.grant_id, client_id)
    scopes = list(row.scopes)
    if scope is not None and str(scope).strip():
        asked = set(str(scope).split())
        if not asked <= set(scopes):
            raise OAuthProtocolError("invalid_scope", "a refresh may only narrow the scopes")
        scopes = sorted(asked)
    bound = row.resource or ""
    if resource is not None and canonical_resource(str(resource)) != canonical_resource(bound):
        raise OAuthProtocolError("invalid_target", "resource differs from the one this token was issued for")
    row.revoked_at = utcnow()
    session.add(row)
    tokens = _mint(session, settings, grant, scopes, bound)
    record_audit(
        session,
        tenant_id=grant.tenant_id,
        actor=Principal.user(grant.user_id, grant.tenant_id),
        action="oauth.token_refreshed",
        object_type="oauth_grant",
        object_id=grant.id,
        metadata={"client_id": client.client_id, "scopes": scopes},
    )
    return tokens


def revoke_token(session: Session, *, token: Any, client_id: Any) -> None:
    """RFC 7009: an access token is deleted; a refresh token revokes its whole grant (and so
    every access token minted from it). Unknown tokens, and tokens of another client, are
    ignored silently (the endpoint answers 200 either way)."""
    if not isinstance(token, str) or not token or len(token) > 200:
        raise OAuthProtocolError("invalid_request", "token is required")
    token_hash = hash_token(token)
    grant_id: uuid.UUID | None = None
    access = session.exec(select(McpOAuthAccessToken).where(McpOAuthAccessToken.token_hash == token_hash)).first()
    if access is not None:
        grant_id = access.grant_id
    else:
        rt = session.exec(select(McpOAuthRefreshToken).where(McpOAuthRefreshToken.token_hash == token_hash)).first()
        if rt is not None:
            grant_id = rt.grant_id
    if grant_id is None:
        return
    found = session.exec(
        select(McpOAuthGrant, McpOAuthClient.client_id)  # type: ignore[call-overload]
        .join(McpOAuthClient, McpOAuthClient.id == McpOAuthGrant.client_id)
        .where(McpOAuthGrant.id == grant_id)
    ).first()
    if found is None or (client_id and found[1] != client_id):
        return
    grant = found[0]
    if access is not None:
        session.delete(access)
        session.flush()
        return
    if _revoke_rows(session, grant.id, utcnow()):
        record_audit(
            session,
            tenant_id=grant.tenant_id,
            actor=Principal.user(grant.user_id, grant.tenant_id),
            action="oauth.grant_revoked",
            object_type="oauth_grant",
            object_id=grant.id,
            metadata={
                "client_id": found[1],
                "by": "client",
                "before": {"status": "active"},
                "after": {"status": "revoked"},
            },
        )


# --- the user's own grants (/api/me/oauth-grants) -------------------------------------------------


def list_grants(session: Session, principal: Principal) -> list[tuple[McpOAuthGrant, McpOAuthClient]]:
    """The calling user's active grants in the current tenant, newest first."""
    if not principal.is_user or principal.user_id is None:
        raise Unauthenticated("sign in to list connected applications")
    rows = session.exec(
        select(McpOAuthGrant, McpOAuthClient)  # type: ignore[call-overload]
        .join(McpOAuthClient, McpOAuthClient.id == McpOAuthGrant.client_id)
        .where(
            McpOAuthGrant.user_id == principal.user_id,
            McpOAuthGrant.tenant_id == principal.tenant_id,
            McpOAuthGrant.status == "active",
        )
        .order_by(McpOAuthGrant.created_at.desc())  # type: ignore[attr-defined]
    ).all()
    return [(g, c) for g, c in rows]


def do_revoke_grant(session: Session, principal: Principal, grant: McpOAuthGrant, *, by: str) -> None:
    """Revoke an already-authorized ``grant`` and its tokens, audited once. Shared by the user's
    own revocation and the admin console's (``by`` says which); a revoked grant is left as is."""
    if grant.status != "active":
        return
    client = session.get(McpOAuthClient, grant.client_id)
    _revoke_rows(session, grant.id, utcnow())
    session.refresh(grant)
    meta = {"client_id": client.client_id if client else None, "by": by}
    if by == "admin":
        meta["user_id"] = grant.user_id
    record_audit(
        session,
        tenant_id=grant.tenant_id,
        actor=principal,
        action="oauth.grant_revoked",
        object_type="oauth_grant",
        object_id=grant.id,
        metadata={**meta, "before": {"status": "active"}, "after": {"status": "revoked"}},
    )


def revoke_grant(session: Session, principal: Principal, grant_id: uuid.UUID) -> McpOAuthGrant:
    """Revoke one of the caller's grants; someone else's (or an unknown id) is NOT_FOUND. The
    next call with any of its tokens is refused (``verify_access_token`` reads the grant)."""
    if not principal.is_user or principal.user_id is None:
        raise Unauthenticated("sign in to revoke an application")
    grant = session.get(McpOAuthGrant, grant_id)
    if grant is None or grant.user_id != principal.user_id:
        raise NotFound("no such authorization")
    do_revoke_grant(session, principal, grant, by="user")
    return grant
