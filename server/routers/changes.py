"""/api/changes: the change log (own changes; everything in knowledge bases you manage) and revert."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from openkb.content import changes as change_service
from openkb.content import revert as revert_service
from openkb.errors import NotRevertible, RevertConflict
from openkb.permissions import access_change
from server.auth import PrincipalDep
from server.deps import CtxDep, SessionDep
from server.errors import error_responses, errors_for
from server.routers.content import DocWriterDep
from server.schemas import RequestModel

router = APIRouter(tags=["changes"])


class ChangeOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: uuid.UUID
    run_id: uuid.UUID
    actor_type: str
    actor_id: uuid.UUID | None
    op: str
    object_type: str
    object_id: uuid.UUID
    summary: str
    status: str
    knowledge_base_id: uuid.UUID | None = None
    workspace_id: uuid.UUID | None = None
    before: dict[str, Any]
    after: dict[str, Any]
    created_at: datetime


class ChangeList(BaseModel):
    items: list[ChangeOut]


class RevertIn(RequestModel):
    change_id: uuid.UUID | None = None
    run_id: str | None = Field(None, min_length=1, max_length=200, description="a UUID or the run name used")


class RevertedItem(BaseModel):
    change_id: uuid.UUID
    op: str
    object_type: str
    object_id: uuid.UUID
    reverted_by_change_id: uuid.UUID | None


class SkippedItem(BaseModel):
    change_id: uuid.UUID
    reason: str


class RevertOut(BaseModel):
    run_id: uuid.UUID = Field(description="the run the revert itself was recorded in (revert it to redo)")
    reverted: list[RevertedItem]
    skipped: list[SkippedItem]


@router.get("/api/changes", response_model=ChangeList, responses=error_responses(401, 403, 422))
def list_changes(
    session: SessionDep,
    principal: PrincipalDep,
    run_id: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    knowledge_base_id: uuid.UUID | None = None,
    object_id: uuid.UUID | None = None,
    status: Literal["applied", "reverted"] | None = None,
    since: datetime | None = None,
    before: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    """Newest first. Without manage rights only the caller's own changes; page with ``before``."""
    rows = change_service.list_changes(
        session,
        principal,
        run_id=run_id,
        knowledge_base_id=knowledge_base_id,
        object_id=object_id,
        status=status,
        since=since,
        before=before,
        limit=limit,
    )
    return {"items": [change_service.change_out(c) for c in rows]}


@router.get("/api/changes/{change_id}", response_model=ChangeOut, responses=error_responses(401, 403, 404, 422))
def get_change(change_id: uuid.UUID, session: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    return change_service.change_out(access_change(session, principal, change_id))


@router.post(
    "/api/changes/revert",
    response_model=RevertOut,
    responses=errors_for(401, 403, 404, 409, 413, 422, RevertConflict, NotRevertible),
)
def revert(body: RevertIn, session: SessionDep, actor: DocWriterDep, ctx: CtxDep) -> dict[str, Any]:
    """Undo one change (``change_id``) or a whole run (``run_id``), newest first, as new recorded
    writes. 409 ``REVERT_CONFLICT`` when an object changed again later outside the set."""
    return revert_service.revert(session, actor, change_id=body.change_id, run_id=body.run_id, blobs=ctx.blobs)
