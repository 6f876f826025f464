"""POST /api/admin/users/{user_id}/role: make a user tenant administrator or a member again.

Thin adapter over ``openkb.accounts.tenant_roles`` (authorizes and audits ``user.role_changed``).
"""

from __future__ import annotations

import uuid
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from openkb.accounts.tenant_roles import set_tenant_role
from server.auth import AdminDep
from server.deps import SessionDep
from server.errors import error_responses
from server.schemas import RequestModel

router = APIRouter(prefix="/api/admin", tags=["admin"])


class RoleIn(RequestModel):
    role: Literal["tenant_admin", "member"]
    tenant_id: uuid.UUID | None = Field(
        None, description="the membership to change (system_admin: any tenant); default: the admin's tenant"
    )


class RoleOut(BaseModel):
    user_id: uuid.UUID
    tenant_id: uuid.UUID
    role: str


@router.post("/users/{user_id}/role", response_model=RoleOut, responses=error_responses(401, 403, 404, 422))
def set_role(user_id: uuid.UUID, body: RoleIn, session: SessionDep, principal: AdminDep) -> RoleOut:
    """403 for one's own role and for a system_admin's; 404 for a user outside the tenant (or a
    ``tenant_id`` the admin does not administer, or where the user has no membership)."""
    row = set_tenant_role(session, principal, user_id, body.role, tenant_id=body.tenant_id)
    return RoleOut(user_id=row.user_id, tenant_id=row.tenant_id, role=row.role)
