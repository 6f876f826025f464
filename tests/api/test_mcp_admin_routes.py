"""/api/admin/mcp/*: a tenant's OAuth clients (counts, disable/enable) and grants (revoke), for
administrators only; a disabled client's token is refused on /mcp, enabling restores it."""

from __future__ import annotations

import secrets
import uuid
from datetime import timedelta

import httpx
from sqlmodel import select

from openkb.bootstrap import default_tenant
from openkb.models import AuditLog, McpOAuthAccessToken, McpOAuthClient, McpOAuthGrant
from openkb.models._base import utcnow
from openkb.security import hash_token
from tests.api.helpers import login, make_login_user

READ = ["kb:read", "kb:search", "doc:read"]


def _oauth_token(committed, user_id, resource: str) -> tuple[str, uuid.UUID, uuid.UUID]:
    """Client, grant and access-token rows as the authorization server stores them."""
    plain = "kbat_" + secrets.token_urlsafe(32)
    with committed() as s:
        tenant_id = default_tenant(s).id
        client = McpOAuthClient(
            tenant_id=tenant_id,
            client_id=f"https://client.example/{uuid.uuid4().hex[:6]}",
            client_name="Admin-view IDE",
            redirect_uris=["http://127.0.0.1/cb"],
            allowed_scopes=READ,
            status="active",
        )
        s.add(client)
        s.flush()
        grant = McpOAuthGrant(tenant_id=tenant_id, user_id=user_id, client_id=client.id, scopes=READ, status="active")
        s.add(grant)
        s.flush()
        s.add(
            McpOAuthAccessToken(
                tenant_id=tenant_id,
                grant_id=grant.id,
                token_hash=hash_token(plain),
                scopes=READ,
                resource=resource,
                expires_at=utcnow() + timedelta(hours=1),
            )
        )
        s.commit()
        return plain, client.id, grant.id


def _tools(base: str, token: str) -> int:
    return httpx.post(
        base + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
        },
        timeout=30,
    ).status_code


def test_clients_and_grants_for_admins(live_server, committed, app_ctx):
    admin, user = make_login_user(committed, role="tenant_admin"), make_login_user(committed)
    sysadmin = make_login_user(committed, role="system_admin")
    resource = app_ctx.settings.app_base_url.rstrip("/") + "/mcp"
    token, client_pk, grant_id = _oauth_token(committed, user.user_id, resource)
    assert _tools(live_server, token) == 200
    with login(live_server, user.email) as u:
        assert u.get("/api/admin/mcp/clients").status_code == 403
    with login(live_server, admin.email) as a:
        clients = {c["id"]: c for c in a.get("/api/admin/mcp/clients").json()["items"]}
        mine = clients[str(client_pk)]
        assert (mine["active_grants"], mine["live_tokens"], mine["status"]) == (1, 1, "active")
        grants = [g for g in a.get("/api/admin/mcp/grants").json()["items"] if g["id"] == str(grant_id)]
        assert grants and grants[0]["email"] == user.email and "token" not in grants[0]

        # A registered client serves every tenant: switching it is the system_admin's (docs/oauth.md).
        assert a.post(f"/api/admin/mcp/clients/{client_pk}/disable").status_code == 403
        with login(live_server, sysadmin.email) as sa:
            assert sa.post(f"/api/admin/mcp/clients/{client_pk}/disable").json()["status"] == "disabled"
            assert _tools(live_server, token) == 401
            assert sa.post(f"/api/admin/mcp/clients/{client_pk}/enable").json()["status"] == "active"
            assert _tools(live_server, token) == 200
        assert a.post(f"/api/admin/mcp/grants/{grant_id}/revoke").json()["status"] == "revoked"
        assert _tools(live_server, token) == 401
        assert a.post(f"/api/admin/mcp/clients/{uuid.uuid4()}/disable").status_code == 404
    with committed() as s:
        acts = {
            r.action
            for r in s.exec(select(AuditLog).where(AuditLog.actor_user_id.in_([admin.user_id, sysadmin.user_id])))  # type: ignore[attr-defined]
        }
    assert {"oauth.client_disabled", "oauth.client_enabled", "oauth.grant_revoked"} <= acts
