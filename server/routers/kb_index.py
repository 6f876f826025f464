"""Routes of the settings pages that the content router does not carry.

* /api/knowledge-bases/{id}/index-status and /index-retry: the knowledge base settings page's
  index panel (managers only; counts, and re-queueing the failed pages). Thin adapter over
  ``openkb.content.kb_index``; models and Milvus stay in the admin routes.
* DELETE /api/workspaces/{id} and /api/knowledge-bases/{id}: the settings pages' delete (owner
  only, an emptied one only), over ``openkb.content.removal``.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from openkb.content import kb_index
from openkb.content.removal import delete_knowledge_base, delete_workspace
from openkb.permissions.principal import Principal
from server.auth import UserDep, require_scopes
from server.deps import SessionDep
from server.errors import error_responses

router = APIRouter(tags=["knowledge bases"])


class KbIndexStatus(BaseModel):
    pending: int = Field(description="pages waiting for (or being retried by) the worker")
    indexed: int
    failed: int = Field(description="pages the worker gave up on; retry re-queues them")


class KbIndexRetried(BaseModel):
    queued: int


@router.get(
    "/api/knowledge-bases/{kb_id}/index-status",
    response_model=KbIndexStatus,
    responses=error_responses(401, 403, 404, 422),
)
def index_status(
    kb_id: uuid.UUID,
    session: SessionDep,
    principal: UserDep,
    _scoped: Annotated[Principal, Depends(require_scopes("kb:read"))],
) -> KbIndexStatus:
    return KbIndexStatus(**kb_index.kb_index_status(session, principal, kb_id))


@router.post(
    "/api/knowledge-bases/{kb_id}/index-retry",
    response_model=KbIndexRetried,
    responses=error_responses(401, 403, 404, 422),
)
def index_retry(
    kb_id: uuid.UUID,
    session: SessionDep,
    principal: UserDep,
    _scoped: Annotated[Principal, Depends(require_scopes("kb:write"))],
) -> KbIndexRetried:
    """Put the failed pages back in the queue (at most ``RETRY_BATCH`` per call)."""
    return KbIndexRetried(queued=kb_index.retry_failed(session, principal, kb_id))


class WorkspaceDeleted(BaseModel):
    name: str
    slug: str
    knowledge_bases: int = Field(description="empty knowledge bases removed with it")
    members: int = Field(description="memberships that ended")


@router.delete(
    "/api/workspaces/{workspace_id}",
    response_model=WorkspaceDeleted,
    tags=["workspaces"],
    responses=error_responses(401, 403, 404, 409, 422),
)
def remove_workspace(
    workspace_id: uuid.UUID,
    session: SessionDep,
    principal: UserDep,
    _scoped: Annotated[Principal, Depends(require_scopes("kb:write"))],
) -> WorkspaceDeleted:
    """Owner only (403 otherwise). 409 ``CONFLICT`` with ``reason: not_empty`` and the counts while
    a knowledge base of it still holds pages or folders (trashed ones too): there is no trash
    for workspaces, so nothing of value goes with one. Audited ``workspace.deleted``."""
    return WorkspaceDeleted(**delete_workspace(session, principal, workspace_id))


class KnowledgeBaseDeleted(BaseModel):
    title: str
    slug: str
    workspace_id: uuid.UUID


@router.delete(
    "/api/knowledge-bases/{kb_id}",
    response_model=KnowledgeBaseDeleted,
    responses=error_responses(401, 403, 404, 409, 422),
)
def remove_knowledge_base(
    kb_id: uuid.UUID,
    session: SessionDep,
    principal: UserDep,
    _scoped: Annotated[Principal, Depends(require_scopes("kb:write"))],
) -> KnowledgeBaseDeleted:
    """The owner only (403 for a manager). 409 ``CONFLICT`` with ``reason: not_empty`` and the
    count while it holds pages or folders (trash included): archive it to keep it instead.
    Audited ``knowledge_base.deleted``."""
    return KnowledgeBaseDeleted(**delete_knowledge_base(session, principal, kb_id))
