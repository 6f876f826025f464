"""The admin console's MCP view: the OAuth clients a tenant's members use (disable / enable),
the tenant's active grants (revoke) and how many access tokens are live, for tenant and system
administrators.

Authorization is ``access_admin`` + ``can_manage_tenant``: a grant of another tenant is
NOT_FOUND, like an unknown id. A client registered by Dynamic Client Registration or a
metadata document is ONE row for the whole instance (``/oauth/register`` stores it in the
default tenant) while its grants belong to each consenting user's tenant, so a tenant's view
lists the clients with a grant in that tenant and counts only that tenant's grants and tokens,
and disabling or enabling such a client, which cuts off (or restores) every tenant's users at
once, is a system administrator's decision: a tenant_admin gets PERMISSION_DENIED. An app
installation's own client belongs to its tenant, whose administrator may switch it
(docs/oauth.md#administration). Disabling a client refuses its tokens on their next use
(``tokens`` checks the client's status on every call) without revoking the users' grants, so
enabling it again restores them; revoking a grant is final.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text
from sqlmodel import Session

from openkb.accounts.users import access_admin
from openkb.audit import record_audit
from openkb.errors import NotFound, PermissionDenied
from openkb.models import McpOAuthClient, McpOAuthGrant
from openkb.oauth.grants import do_revoke_grant
from openkb.permissions.principal import Principal

MAX_ROWS = 500

# :t is the tenant whose view this is, or NULL for a system administrator's instance-wide view.
_CLIENTS_SQL = text(
    """
SELECT c.id, c.client_id, c.client_name, c.registration, c.status, c.created_at,
       (SELECT count(*) FROM mcp_oauth_grants g WHERE g.client_id = c.id AND g.status = 'active'
         AND (CAST(:t AS uuid) IS NULL OR g.tenant_id = CAST(:t AS uuid))) AS active_grants,
       (SELECT count(*) FROM mcp_oauth_access_tokens t JOIN mcp_oauth_grants g ON g.id = t.grant_id
         WHERE g.client_id = c.id AND g.status = 'active' AND t.expires_at > now()
         AND (CAST(:t AS uuid) IS NULL OR g.tenant_id = CAST(:t AS uuid))) AS live_tokens,
       (SELECT max(g.last_used_at) FROM mcp_oauth_grants g WHERE g.client_id = c.id
         AND (CAST(:t AS uuid) IS NULL OR g.tenant_id = CAST(:t AS uuid))) AS last_used_at
FROM mcp_oauth_clients c
WHERE CAST(:t AS uuid) IS NULL
   OR (c.installation_id IS NOT NULL AND c.tenant_id = CAST(:t AS uuid))
   OR EXISTS (SELECT 1 FROM mcp_oauth_grants g WHERE g.client_id = c.id AND g.tenant_id = CAST(:t AS uuid))
ORDER BY c.created_at DESC LIMIT :n
"""
)

_GRANTS_SQL = text(
    """
SELECT g.id, g.scopes, g.created_at, g.last_used_at, c.client_id, c.client_name, u.email, u.display_name
FROM mcp_oauth_grants g JOIN mcp_oauth_clients c ON c.id = g.client_id JOIN users u ON u.id = g.user_id
WHERE g.tenant_id = :t AND g.status = 'active' ORDER BY g.created_at DESC LIMIT :n
"""
)


def _tenant(session: Session, principal: Principal, tenant_id: uuid.UUID | None) -> uuid.UUID:
    scope = access_admin(session, principal)
    target = tenant_id or scope.tenant_id
    if target is None or not scope.can_manage_tenant(target):
        raise NotFound("no such tenant")
    return target


def list_clients(session: Session, principal: Principal, tenant_id: uuid.UUID | None = None) -> list[dict[str, Any]]:
    """The clients with a grant in the tenant (or the tenant's app clients), with that tenant's
    counts only: another tenant's use of a shared client is not theirs to see. A system
    administrator naming no tenant sees every client with the instance's counts."""
    scope = access_admin(session, principal)
    t = None if scope.is_system_admin and tenant_id is None else _tenant(session, principal, tenant_id)
    return [dict(r._mapping) for r in session.execute(_CLIENTS_SQL, {"t": t, "n": MAX_ROWS})]


def list_grants(session: Session, principal: Principal, tenant_id: uuid.UUID | None = None) -> list[dict[str, Any]]:
    """Active grants: who authorized which client with which scopes (never a token)."""
    t = _tenant(session, principal, tenant_id)
    return [dict(r._mapping) for r in session.execute(_GRANTS_SQL, {"t": t, "n": MAX_ROWS})]


def set_client_status(
    session: Session, principal: Principal, client_pk: uuid.UUID, status: str, tenant_id: uuid.UUID | None = None
) -> McpOAuthClient:
    """Disable or enable a client. A registered client serves every tenant, so only a system
    administrator switches it; a tenant_admin may switch their tenant's app clients only."""
    scope = access_admin(session, principal)
    if tenant_id is not None:
        _tenant(session, principal, tenant_id)
    row = session.get(McpOAuthClient, client_pk, with_for_update=True)
    if row is None or (row.installation_id is not None and not scope.can_manage_tenant(row.tenant_id)):
        raise NotFound("no such client")
    if row.installation_id is None and not scope.is_system_admin:
        raise PermissionDenied("a registered client serves every tenant: only a system_admin disables or enables it")
    before = row.status
    if before != status:
        row.status = status
        session.add(row)
        session.flush()
        record_audit(
            session,
            tenant_id=row.tenant_id,
            actor=principal,
            action="oauth.client_disabled" if status == "disabled" else "oauth.client_enabled",
            object_type="oauth_client",
            object_id=row.id,
            metadata={"client_id": row.client_id, "before": {"status": before}, "after": {"status": status}},
        )
    return row


def revoke_grant(
    session: Session, principal: Principal, grant_id: uuid.UUID, tenant_id: uuid.UUID | None = None
) -> McpOAuthGrant:
    """An administrator revokes someone's grant (its tokens fail on their next use)."""
    t = _tenant(session, principal, tenant_id)
    grant = session.get(McpOAuthGrant, grant_id)
    if grant is None or grant.tenant_id != t:
        raise NotFound("no such authorization")
    do_revoke_grant(session, principal, grant, by="admin")
    return grant


__all__ = ["list_clients", "list_grants", "revoke_grant", "set_client_status"]
