"""/api/admin/mcp/*: the MCP OAuth clients the tenant's members use (the tenant's grant and
live-token counts; disable / enable, a system_admin's action for a registered client, which
serves every tenant: docs/oauth.md#administration) and the tenant's active grants (revoke), for
the admin console. Thin adapter over ``openkb.oauth.admin``, which authorizes and audits.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel

from openkb.oauth import admin as oauth_admin
from server.auth import AdminDep
from server.deps import SessionDep
from server.errors import error_responses

router = APIRouter(prefix="/api/admin/mcp", tags=["admin: mcp"])
_ERR = error_responses(401, 403, 404, 422)


class McpClientOut(BaseModel):
    id: uuid.UUID
    client_id: str
    client_name: str
    registration: str
    status: str
    created_at: datetime
    active_grants: int
    live_tokens: int
    last_used_at: datetime | None = None


class McpClientList(BaseModel):
    items: list[McpClientOut]


class McpGrantOut(BaseModel):
    id: uuid.UUID
    scopes: list[str]
    created_at: datetime
    last_used_at: datetime | None = None
    client_id: str
    client_name: str
    email: str
    display_name: str


class McpGrantList(BaseModel):
    items: list[McpGrantOut]


class McpStatusOut(BaseModel):
    id: uuid.UUID
    status: str


@router.get("/clients", response_model=McpClientList, responses=_ERR)
def list_clients(session: SessionDep, principal: AdminDep, tenant_id: uuid.UUID | None = None) -> McpClientList:
    return McpClientList(items=[McpClientOut(**r) for r in oauth_admin.list_clients(session, principal, tenant_id)])


@router.post("/clients/{client_pk}/disable", response_model=McpStatusOut, responses=_ERR)
def disable_client(
    client_pk: uuid.UUID, session: SessionDep, principal: AdminDep, tenant_id: uuid.UUID | None = None
) -> McpStatusOut:
    """The client's tokens are refused from their next use, in every tenant; its grants stay
    (enable restores them). A tenant_admin gets 403 for a registered client."""
    row = oauth_admin.set_client_status(session, principal, client_pk, "disabled", tenant_id)
    return McpStatusOut(id=row.id, status=row.status)


@router.post("/clients/{client_pk}/enable", response_model=McpStatusOut, responses=_ERR)
def enable_client(
    client_pk: uuid.UUID, session: SessionDep, principal: AdminDep, tenant_id: uuid.UUID | None = None
) -> McpStatusOut:
    row = oauth_admin.set_client_status(session, principal, client_pk, "active", tenant_id)
    return McpStatusOut(id=row.id, status=row.status)


@router.get("/grants", response_model=McpGrantList, responses=_ERR)
def list_grants(session: SessionDep, principal: AdminDep, tenant_id: uuid.UUID | None = None) -> McpGrantList:
    return McpGrantList(items=[McpGrantOut(**r) for r in oauth_admin.list_grants(session, principal, tenant_id)])


@router.post("/grants/{grant_id}/revoke", response_model=McpStatusOut, responses=_ERR)
def revoke_grant(
    grant_id: uuid.UUID, session: SessionDep, principal: AdminDep, tenant_id: uuid.UUID | None = None
) -> McpStatusOut:
    """Final: the grant's tokens fail on their next use."""
    row = oauth_admin.revoke_grant(session, principal, grant_id, tenant_id)
    return McpStatusOut(id=row.id, status=row.status)
