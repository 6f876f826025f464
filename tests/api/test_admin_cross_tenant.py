"""A tenant administrator's reach stops at their tenant: instance-wide things (an MCP OAuth
client, which is one row for every tenant; a user's status, which is one for all their
memberships; a system_admin's memberships) are a system administrator's decision
(docs/permissions.md#administrators, docs/oauth.md#administration)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from openkb.accounts import admin as accounts_admin
from openkb.accounts.tenant_roles import set_tenant_role
from openkb.bootstrap import default_tenant
from openkb.errors import PermissionDenied
from openkb.models import McpOAuthAccessToken, McpOAuthClient, McpOAuthGrant, TenantMembership
from openkb.models._base import utcnow
from openkb.oauth import admin as oauth_admin
from openkb.permissions.principal import Principal
from openkb.security import hash_token
from tests.factories import make_tenant, make_user

READ = ["kb:read", "kb:search", "doc:read"]


def _tenant_b_grant(db, user, tenant_b) -> McpOAuthClient:
    """As /oauth/register + /oauth/authorize write them: the client in the default tenant, the
    grant and its access token in the consenting user's tenant."""
    client = McpOAuthClient(
        tenant_id=default_tenant(db).id,
        client_id=f"kbcl_{hash_token(str(user.id))[:10]}",
        client_name="Tenant-B IDE",
        redirect_uris=["http://127.0.0.1/cb"],
        allowed_scopes=READ,
        status="active",
    )
    db.add(client)
    db.flush()
    grant = McpOAuthGrant(tenant_id=tenant_b.id, user_id=user.id, client_id=client.id, scopes=READ, status="active")
    db.add(grant)
    db.flush()
    db.add(
        McpOAuthAccessToken(
            tenant_id=tenant_b.id,
            grant_id=grant.id,
            token_hash=hash_token("kbat_" + str(grant.id)),
            scopes=READ,
            resource="http://testserver/mcp",
            expires_at=utcnow() + timedelta(hours=1),
        )
    )
    db.flush()
    return client


def test_mcp_client_admin_is_tenant_scoped_and_status_is_system_admins(db):
    home = default_tenant(db)
    tenant_b = make_tenant(db)
    home_admin = Principal.user(make_user(db, home, role="tenant_admin"), home.id)
    b_admin = Principal.user(make_user(db, tenant_b, role="tenant_admin"), tenant_b.id)
    sysadmin = Principal.user(make_user(db, home, role="system_admin"), home.id)
    client = _tenant_b_grant(db, make_user(db, tenant_b), tenant_b)

    # The default tenant's admin neither sees another tenant's usage nor switches the client.
    assert client.id not in {r["id"] for r in oauth_admin.list_clients(db, home_admin)}
    with pytest.raises(PermissionDenied):
        oauth_admin.set_client_status(db, home_admin, client.id, "disabled")
    # Tenant B's admin sees the client their users authorized, with their tenant's counts...
    mine = {r["id"]: r for r in oauth_admin.list_clients(db, b_admin)}[client.id]
    assert (mine["active_grants"], mine["live_tokens"]) == (1, 1)
    # ...but disabling it would cut every tenant's users off: 403, not a 404 that hides it.
    with pytest.raises(PermissionDenied):
        oauth_admin.set_client_status(db, b_admin, client.id, "disabled")
    # A home-tenant grant of the same client is counted for the home tenant only.
    db.add(
        McpOAuthGrant(tenant_id=home.id, user_id=home_admin.user_id, client_id=client.id, scopes=READ, status="active")
    )
    db.flush()
    home_row = {r["id"]: r for r in oauth_admin.list_clients(db, home_admin)}[client.id]
    assert (home_row["active_grants"], home_row["live_tokens"]) == (1, 0)
    assert {r["id"]: r for r in oauth_admin.list_clients(db, b_admin)}[client.id]["active_grants"] == 1
    # The system administrator decides for the instance.
    assert oauth_admin.set_client_status(db, sysadmin, client.id, "disabled").status == "disabled"
    everywhere = {r["id"]: r for r in oauth_admin.list_clients(db, sysadmin)}[client.id]
    assert (everywhere["active_grants"], everywhere["live_tokens"]) == (2, 1)


@pytest.mark.parametrize("change", [accounts_admin.suspend, accounts_admin.reject, accounts_admin.activate])
def test_tenant_admin_cannot_change_status_of_a_user_of_another_tenant_too(db, change):
    home, other = default_tenant(db), make_tenant(db)
    admin = Principal.user(make_user(db, home, role="tenant_admin"), home.id)
    status = "suspended" if change is accounts_admin.activate else "pending_activation"
    shared = make_user(db, home, status=status)
    db.add(TenantMembership(tenant_id=other.id, user_id=shared.id, role="member"))
    db.flush()
    with pytest.raises(PermissionDenied):
        change(db, admin, shared.id)
    db.refresh(shared)
    assert shared.status == status
    # A user of the admin's tenant alone is still theirs to manage; a system_admin manages both.
    own = make_user(db, home, status=status)
    assert change(db, admin, own.id).status != status
    sysadmin = Principal.user(make_user(db, home, role="system_admin"), home.id)
    assert change(db, sysadmin, shared.id).status != status


def test_tenant_admin_cannot_change_any_membership_of_a_system_admin(db):
    home, other = default_tenant(db), make_tenant(db)
    admin = Principal.user(make_user(db, home, role="tenant_admin"), home.id)
    sysadmin_elsewhere = make_user(db, other, role="system_admin")
    db.add(TenantMembership(tenant_id=home.id, user_id=sysadmin_elsewhere.id, role="member"))
    db.flush()
    with pytest.raises(PermissionDenied):
        set_tenant_role(db, admin, sysadmin_elsewhere.id, "tenant_admin")
    sysadmin = Principal.user(make_user(db, home, role="system_admin"), home.id)
    assert (
        set_tenant_role(db, sysadmin, sysadmin_elsewhere.id, "tenant_admin", tenant_id=home.id).role == "tenant_admin"
    )
