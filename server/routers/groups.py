"""/api/admin/groups: user groups of the caller's tenant (tenant_admin / system_admin of it).

The rules (who, tenant boundary, audit, what deleting a group removes) live in
``openkb.permissions.groups``; these routes parse, call it and shape the answer. Non-admins get
403 (admin routes are not secret); a group or user of another tenant is 404.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Request, Response, status
from pydantic import BaseModel, Field

from openkb.errors import AlreadyExists
from openkb.models import Group, User
from openkb.permissions import groups as group_service
from server.auth import AdminDep, client_ip, user_agent
from server.deps import SessionDep
from server.errors import error_responses, errors_for
from server.routers.auth import Body

router = APIRouter(prefix="/api/admin/groups", tags=["admin"])

_ERR = error_responses(401, 403, 404, 409, 422)
GroupName = Annotated[str, Field(min_length=1, max_length=1000)]


class GroupIn(Body):
    name: GroupName


class GroupOut(BaseModel):
    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    member_count: int
    created_by: uuid.UUID
    created_at: datetime
    updated_at: datetime


class GroupList(BaseModel):
    items: list[GroupOut]


class MemberIn(Body):
    user_id: uuid.UUID | None = None
    email: str | None = Field(None, min_length=3, max_length=320, description="or the user's email")


class MemberOut(BaseModel):
    user_id: uuid.UUID
    email: str
    display_name: str
    status: str
    added_at: datetime


class MemberList(BaseModel):
    items: list[MemberOut]


def _group(g: Group, count: int) -> GroupOut:
    return GroupOut(
        id=g.id,
        tenant_id=g.tenant_id,
        name=g.name,
        member_count=count,
        created_by=g.created_by,
        created_at=g.created_at,
        updated_at=g.updated_at,
    )


def _one(session: SessionDep, g: Group) -> GroupOut:
    return _group(g, group_service.member_counts(session, [g.id]).get(g.id, 0))


def _member(m: Any, u: User) -> MemberOut:
    return MemberOut(user_id=u.id, email=u.email, display_name=u.display_name, status=u.status, added_at=m.created_at)


def _where(request: Request) -> dict[str, str | None]:
    return {"ip": client_ip(request), "user_agent": user_agent(request)}


@router.get("", response_model=GroupList, responses=_ERR)
def list_groups(session: SessionDep, principal: AdminDep) -> GroupList:
    rows = group_service.list_groups(session, principal)
    counts = group_service.member_counts(session, [g.id for g in rows])
    return GroupList(items=[_group(g, counts.get(g.id, 0)) for g in rows])


@router.post(
    "", status_code=status.HTTP_201_CREATED, response_model=GroupOut, responses=errors_for(_ERR, AlreadyExists)
)
def create_group(body: GroupIn, request: Request, session: SessionDep, principal: AdminDep) -> GroupOut:
    """409 ``ALREADY_EXISTS`` when the tenant has a group of that name."""
    return _group(group_service.create_group(session, principal, name=body.name, **_where(request)), 0)


@router.get("/{group_id}", response_model=GroupOut, responses=_ERR)
def get_group(group_id: uuid.UUID, session: SessionDep, principal: AdminDep) -> GroupOut:
    return _one(session, group_service.access_group(session, principal, group_id))


@router.put("/{group_id}", response_model=GroupOut, responses=errors_for(_ERR, AlreadyExists))
def rename_group(
    group_id: uuid.UUID, body: GroupIn, request: Request, session: SessionDep, principal: AdminDep
) -> GroupOut:
    return _one(session, group_service.rename_group(session, principal, group_id, name=body.name, **_where(request)))


@router.delete("/{group_id}", status_code=status.HTTP_204_NO_CONTENT, response_class=Response, responses=_ERR)
def delete_group(group_id: uuid.UUID, request: Request, session: SessionDep, principal: AdminDep) -> Response:
    """Also removes every collaborator grant the group holds (audited, same transaction)."""
    group_service.delete_group(session, principal, group_id, **_where(request))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{group_id}/members", response_model=MemberList, responses=_ERR)
def list_members(group_id: uuid.UUID, session: SessionDep, principal: AdminDep) -> MemberList:
    return MemberList(items=[_member(m, u) for m, u in group_service.list_members(session, principal, group_id)])


@router.post(
    "/{group_id}/members",
    status_code=status.HTTP_201_CREATED,
    response_model=MemberOut,
    responses={**_ERR, 200: {"model": MemberOut, "description": "already a member"}},
)
def add_member(
    group_id: uuid.UUID, body: MemberIn, request: Request, response: Response, session: SessionDep, principal: AdminDep
) -> MemberOut:
    """``user_id`` or ``email``: 201 when added, 200 when already a member. The user must belong
    to the group's tenant (404 otherwise)."""
    row, user, created = group_service.add_member(
        session, principal, group_id, user_id=body.user_id, email=body.email, **_where(request)
    )
    if not created:
        response.status_code = status.HTTP_200_OK
    return _member(row, user)


@router.delete(
    "/{group_id}/members/{user_id}", status_code=status.HTTP_204_NO_CONTENT, response_class=Response, responses=_ERR
)
def remove_member(
    group_id: uuid.UUID, user_id: uuid.UUID, request: Request, session: SessionDep, principal: AdminDep
) -> Response:
    group_service.remove_member(session, principal, group_id, user_id=user_id, **_where(request))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
