"""The OAuth-grant alternative to the ``kbapp_`` credential (docs/apps.md#oauth).

An installation may have one OAuth client of OpenKB's authorization server (the one ``/mcp``
uses, docs/oauth.md) with ``registration='app'`` and ``installation_id`` set. Its owner creates
it here with the app's redirect URIs; the app then runs the authorization-code + PKCE flow with
``resource=<APP_BASE_URL>/api/apps/v1`` and ``scope=apps``, and the installation's user (only
them, ``grants.check_installation_user``) consents. The ``kbat_`` access token it gets acts as
that installation on the knowledge routes, exactly like ``kbapp_``: same switches, grants,
collections and quotas, re-read on every call.

Traps:

* the token is bound to the apps resource; ``verify_access_token`` refuses it anywhere else
  (``/mcp``), and an ``/mcp`` token here;
* nothing is cached: revoking the token or the grant, uninstalling, suspending the user all
  stop the very next call (the installation is read in the caller's statement).
"""

from __future__ import annotations

import secrets
import uuid

from sqlmodel import Session, select

from openkb.apps.registry import AppCaller, access_installation, caller_statements, resolve_keyed
from openkb.audit import record_audit
from openkb.errors import NotFound, OAuthProtocolError, Unauthenticated, ValidationError
from openkb.models import App, McpOAuthClient, McpOAuthGrant
from openkb.models._base import utcnow
from openkb.oauth import grants
from openkb.oauth.clients import CLIENT_ID_PREFIX, validate_redirect_uris
from openkb.oauth.grants import APPS_SCOPE
from openkb.oauth.tokens import (
    GRANT_CHECKED,
    GRANT_SOURCE,
    GRANT_TOUCH,
    MAX_TOKEN_CHARS,
    grant_from_columns,
    looks_like_access_token,
)
from openkb.permissions.principal import Principal
from openkb.security import hash_token

API_PATH = "/api/apps/v1"


def apps_resource(base_url: str) -> str:
    """The RFC 8707 resource of the apps API: ``<APP_BASE_URL>/api/apps/v1``."""
    return base_url.strip().rstrip("/") + API_PATH


def installation_client(session: Session, installation_id: uuid.UUID) -> McpOAuthClient | None:
    return session.exec(select(McpOAuthClient).where(McpOAuthClient.installation_id == installation_id)).first()


def set_oauth_client(
    session: Session, principal: Principal, installation_id: uuid.UUID, *, redirect_uris: list[str]
) -> McpOAuthClient:
    """Create the installation's OAuth client, or replace its redirect URIs (the client_id stays,
    so the app keeps its configuration). Public client: PKCE, no secret. Only the installation's
    user, while it is installed."""
    inst = access_installation(session, principal, installation_id)
    if inst.status != "active":
        raise ValidationError("the app is uninstalled", field="installation_id")
    try:
        uris = validate_redirect_uris(redirect_uris)
    except OAuthProtocolError as exc:
        raise ValidationError(exc.detail, field="redirect_uris") from None
    app = session.get(App, inst.app_id)
    row = installation_client(session, installation_id)
    before = list(row.redirect_uris) if row is not None else None
    if row is None:
        row = McpOAuthClient(
            tenant_id=inst.tenant_id,
            client_id=f"{CLIENT_ID_PREFIX}_{secrets.token_urlsafe(24)}",
            client_name=(app.name if app is not None else "App")[:200],
            redirect_uris=uris,
            allowed_scopes=[APPS_SCOPE],
            status="active",
            registration="app",
            meta={"token_endpoint_auth_method": "none", "grant_types": ["authorization_code", "refresh_token"]},
            created_by=inst.user_id,
            installation_id=inst.id,
        )
    else:
        row.redirect_uris, row.updated_at = uris, utcnow()
    session.add(row)
    session.flush()
    record_audit(
        session,
        tenant_id=inst.tenant_id,
        actor=principal,
        action="app.oauth_client_set",
        object_type="app_installation",
        object_id=inst.id,
        metadata={"client_id": row.client_id, "redirect_uris": uris, "before": {"redirect_uris": before}},
    )
    return row


def get_oauth_client(session: Session, principal: Principal, installation_id: uuid.UUID) -> McpOAuthClient:
    inst = access_installation(session, principal, installation_id)
    row = installation_client(session, inst.id)
    if row is None:
        raise NotFound("this installation has no OAuth client")
    return row


def end_installation_grants(session: Session, principal: Principal, installation_id: uuid.UUID) -> int:
    """Uninstall: revoke every grant of the installation's client with its tokens (audited
    ``oauth.grant_revoked``, ``by: uninstall``), so the user's connected applications no longer
    list it. The caller check refuses those tokens anyway; this leaves no live grant behind."""
    client = installation_client(session, installation_id)
    if client is None:
        return 0
    live = session.exec(
        select(McpOAuthGrant).where(McpOAuthGrant.client_id == client.id, McpOAuthGrant.status == "active")
    ).all()
    for grant in live:
        grants.do_revoke_grant(session, principal, grant, by="uninstall")
    return len(live)


# what ``verify_access_token`` reads, in its order (``grant_from_columns``), beside the caller's
# columns, with the same joins, then the installation the token's client belongs to
_OAUTH_COLS = "".join(f", {c} AS o_{n}" for n, c in enumerate(GRANT_CHECKED))
_OAUTH_SOURCE = f"""{GRANT_SOURCE}
JOIN app_installations i ON i.id = oc.installation_id AND i.status = 'active'
                        AND i.user_id = g.user_id AND i.tenant_id = g.tenant_id"""
_OAUTH_STATEMENTS = caller_statements(
    touch=GRANT_TOUCH, source=_OAUTH_SOURCE, where="t.token_hash = :h", cols=_OAUTH_COLS
)


def resolve_oauth_caller(
    session: Session,
    token: str,
    *,
    resource: str,
    secret: str,
    keyed: tuple[str | None, str | None] | None = None,
) -> AppCaller:
    """The installation behind a ``kbat_`` access token minted for the apps API, with its
    switches as of now, in one statement like ``registry.resolve_caller`` (``keyed`` as there):
    the token's own checks are ``verify_access_token``'s, on the same row. Anything else (an
    ``/mcp`` token, a revoked or expired one, a token of an MCP client, an uninstalled app, a
    user no longer a member) is ``Unauthenticated``."""
    if not token or len(token) > MAX_TOKEN_CHARS or not looks_like_access_token(token):
        raise Unauthenticated("not an OAuth access token")
    row, caller = resolve_keyed(session, _OAUTH_STATEMENTS, {"h": hash_token(token)}, keyed, secret)
    if row is None or caller is None:
        raise Unauthenticated("the access token is invalid, expired or revoked, or its app is no longer installed")
    grant = grant_from_columns(tuple(getattr(row, f"o_{n}") for n in range(len(GRANT_CHECKED))), resource)
    if APPS_SCOPE not in grant.scopes:
        raise Unauthenticated("the access token does not carry the apps scope")
    return caller


__all__ = [
    "API_PATH",
    "apps_resource",
    "end_installation_grants",
    "get_oauth_client",
    "installation_client",
    "resolve_oauth_caller",
    "set_oauth_client",
]
