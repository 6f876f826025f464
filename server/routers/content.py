"""/api/workspaces, /api/knowledge-bases, /api/documents, versions, keyed upserts and the trash.

Routes parse, build the caller (``PrincipalDep`` for reads, ``ActorDep`` for writes) and call one
``openkb.content`` service; the request's unit of work commits before the response is sent and
index jobs go out after that commit. Every write belongs to a run: the ``X-Run-Id`` request
header names it (a UUID or any short name), otherwise the request gets a fresh one; the response
echoes it in ``X-Run-Id`` so the caller can revert exactly this request.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field

from openkb.content import Actor
from openkb.content import compare as compare_service
from openkb.content import documents as doc_service
from openkb.content import knowledge_bases as kb_service
from openkb.content import recent as recent_service
from openkb.content import tree as tree_service
from openkb.content import upsert as upsert_service
from openkb.content import versions as version_service
from openkb.content import workspaces as ws_service
from openkb.errors import (
    AlreadyExists,
    DocumentInTrash,
    DuplicateTooLarge,
    FolderDepthExceeded,
    HashMismatch,
    InvalidMove,
    MarkdownDialectError,
    MarkdownTooLarge,
    MetadataTooLarge,
    ModelSettingsForbidden,
    NameTooLong,
    NotAPage,
    NotInTrash,
    TitleTooLong,
    TooManyChanges,
    TooManyTags,
    ValueOutOfRange,
    VersionConflict,
)
from openkb.models import User
from openkb.permissions import access_workspace
from openkb.permissions.principal import Principal
from server.auth import PrincipalDep, UserDep, check_any_scope, check_scopes, client_ip, user_agent
from server.deps import SessionDep
from server.errors import error_responses, errors_for
from server.schemas import RequestModel

router = APIRouter(tags=["content"])

MAX_SORT = 1_000_000
RUN_HEADER = "X-Run-Id"


RunIdHeader = Annotated[
    str | None,
    Header(
        max_length=200,
        description=("Groups this request's writes into a run (UUID or short name) for listing and revert"),
    ),
]


def _actor(request: Request, response: Response, principal: Principal, x_run_id: str | None) -> Actor:
    actor = Actor.of(principal, x_run_id, ip=client_ip(request), user_agent=user_agent(request))
    response.headers[RUN_HEADER] = str(actor.run_id)
    return actor


def get_actor(request: Request, response: Response, principal: UserDep, x_run_id: RunIdHeader = None) -> Actor:
    """The caller of a write. A token needs at least one write scope (``doc:write`` or
    ``kb:write``; which one a service demands is its business), checked here, before any lookup,
    so a read-only token hears ``token lacks scope doc:write or kb:write`` and not an object's
    permission message (docs/accounts.md#scopes)."""
    check_any_scope(principal, "doc:write", "kb:write")
    return _actor(request, response, principal, x_run_id)


ActorDep = Annotated[Actor, Depends(get_actor)]


def _writer(scope: str):  # a FastAPI dependency factory
    """``get_actor`` for a route that a token may use only with ``scope`` (docs/accounts.md#scopes).

    The scope is checked before anything is looked up: a token without it hears ``token lacks
    scope doc:write`` (403 ``INSUFFICIENT_SCOPE``). Left to the services, it got the object's
    permission message ("not allowed to create documents here"), which sends the user asking
    the knowledge base's owner for a role they already have.
    """

    def dep(request: Request, response: Response, principal: UserDep, x_run_id: RunIdHeader = None) -> Actor:
        check_scopes(principal, scope)
        return _actor(request, response, principal, x_run_id)

    return dep


DocWriterDep = Annotated[Actor, Depends(_writer("doc:write"))]
"""Writes to documents: create, edit, save versions, move, delete, restore, upsert by key."""
KbWriterDep = Annotated[Actor, Depends(_writer("kb:write"))]
"""Writes to workspaces, their members and knowledge bases."""

# Errors every route may answer: a bad bearer token (401), CSRF/scope/permission (403).
_READ = error_responses(401, 403, 404, 422)
_WRITE = error_responses(401, 403, 404, 409, 413, 422)
_WS_WRITE = errors_for(_WRITE, AlreadyExists, NameTooLong)
_KB_WRITE = errors_for(
    _WRITE, AlreadyExists, TitleTooLong, NameTooLong, MetadataTooLarge, ValueOutOfRange, ModelSettingsForbidden
)


class Out(BaseModel):
    model_config = ConfigDict(extra="allow")


# --- workspaces ---------------------------------------------------------------------------------


class WorkspaceIn(RequestModel):
    name: str = Field(description="1-1000 characters (NAME_TOO_LONG beyond)")
    slug: str | None = Field(None, max_length=200, description="lowercase letters, digits, dashes; default from name")
    description: str | None = None


class WorkspaceUpdate(RequestModel):
    name: str | None = None
    slug: str | None = Field(None, max_length=200)
    description: str | None = None


class WorkspaceOut(Out):
    id: uuid.UUID
    name: str
    slug: str
    description: str | None = None
    role: str | None = None
    created_at: datetime
    updated_at: datetime


class WorkspaceList(BaseModel):
    items: list[WorkspaceOut]


class MemberIn(RequestModel):
    user_id: uuid.UUID | None = None
    email: str | None = Field(None, max_length=320)
    role: Literal["admin", "member", "guest"]


class MemberUpdate(RequestModel):
    role: Literal["admin", "member", "guest"]


class MemberOut(Out):
    id: uuid.UUID
    workspace_id: uuid.UUID
    user_id: uuid.UUID
    role: str
    created_at: datetime
    email: str | None = Field(None, description="the member's email")
    display_name: str | None = Field(None, description="the member's display name")


class MemberList(BaseModel):
    items: list[MemberOut]


@router.get("/api/workspaces", response_model=WorkspaceList, responses=error_responses(401, 403))
def list_workspaces(session: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    """Workspaces the caller belongs to (any role)."""
    return {"items": ws_service.list_workspaces(session, principal)}


@router.post("/api/workspaces", status_code=status.HTTP_201_CREATED, response_model=WorkspaceOut, responses=_WS_WRITE)
def create_workspace(body: WorkspaceIn, session: SessionDep, actor: KbWriterDep) -> dict[str, Any]:
    """The caller becomes the workspace owner."""
    ws = ws_service.create_workspace(session, actor, name=body.name, slug=body.slug, description=body.description)
    return ws_service.workspace_out(ws, "owner")


@router.get("/api/workspaces/{workspace_id}", response_model=WorkspaceOut, responses=_READ)
def get_workspace(workspace_id: uuid.UUID, session: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    acc = access_workspace(session, principal, workspace_id)
    return ws_service.workspace_out(acc.workspace, acc.role)


@router.put("/api/workspaces/{workspace_id}", response_model=WorkspaceOut, responses=_WS_WRITE)
def update_workspace(
    workspace_id: uuid.UUID, body: WorkspaceUpdate, session: SessionDep, actor: KbWriterDep
) -> dict[str, Any]:
    fields = {k: getattr(body, k) for k in body.model_fields_set}
    ws = ws_service.update_workspace(session, actor, workspace_id, fields)
    return ws_service.workspace_out(ws, access_workspace(session, actor.principal, workspace_id).role)


@router.get("/api/workspaces/{workspace_id}/members", response_model=MemberList, responses=_READ)
def list_members(workspace_id: uuid.UUID, session: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    return {"items": ws_service.list_members(session, principal, workspace_id)}


@router.post(
    "/api/workspaces/{workspace_id}/members",
    status_code=status.HTTP_201_CREATED,
    response_model=MemberOut,
    responses=_WRITE,
)
def add_member(
    workspace_id: uuid.UUID, body: MemberIn, session: SessionDep, actor: KbWriterDep, response: Response
) -> dict[str, Any]:
    """Add a tenant user by ``user_id`` or ``email`` (201), or change an existing member's role (200).
    People without an account are invited with ``POST /api/objects/workspace/{id}/invitations``."""
    row, created = ws_service.add_member(
        session, actor, workspace_id, user_id=body.user_id, email=body.email, role=body.role
    )
    if not created:
        response.status_code = status.HTTP_200_OK
    return ws_service.member_out(row, session.get(User, row.user_id))


@router.put("/api/workspaces/{workspace_id}/members/{user_id}", response_model=MemberOut, responses=_WRITE)
def update_member(
    workspace_id: uuid.UUID, user_id: uuid.UUID, body: MemberUpdate, session: SessionDep, actor: KbWriterDep
) -> dict[str, Any]:
    row = ws_service.update_member(session, actor, workspace_id, user_id, role=body.role)
    return ws_service.member_out(row, session.get(User, row.user_id))


@router.delete(
    "/api/workspaces/{workspace_id}/members/{user_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=_WRITE,
)
def remove_member(workspace_id: uuid.UUID, user_id: uuid.UUID, session: SessionDep, actor: KbWriterDep) -> Response:
    ws_service.remove_member(session, actor, workspace_id, user_id)
    return Response(status_code=204, headers={RUN_HEADER: str(actor.run_id)})


# --- knowledge bases ----------------------------------------------------------------------------


Visibility = Literal["private", "workspace", "public"]


class KnowledgeBaseIn(RequestModel):
    workspace_id: uuid.UUID
    title: str = Field(description="1-1000 characters (TITLE_TOO_LONG beyond)")
    slug: str | None = Field(None, max_length=200)
    description: str | None = None
    visibility: Visibility = "private"
    settings: dict[str, Any] | None = Field(
        None, description=("editor_can_delete, editor_can_create_share_links (bool); never model settings")
    )


class KnowledgeBaseUpdate(RequestModel):
    title: str | None = None
    slug: str | None = Field(None, max_length=200)
    description: str | None = None
    visibility: Visibility | None = None
    status: Literal["active", "archived"] | None = None
    settings: dict[str, Any] | None = None


class KnowledgeBaseOut(Out):
    id: uuid.UUID
    workspace_id: uuid.UUID
    title: str
    slug: str
    description: str | None = None
    visibility: str
    status: str
    settings: dict[str, Any]
    capabilities: list[str] | None = None
    role: str | None = None
    created_at: datetime
    updated_at: datetime


class KnowledgeBaseList(BaseModel):
    items: list[KnowledgeBaseOut]


class TreeItem(Out):
    id: uuid.UUID
    parent_id: uuid.UUID | None
    type: str
    title: str
    status: str
    sort_order: int
    permission_mode: str
    visibility: str | None = Field(None, description="own visibility of a custom-mode item, else null")
    external_key: str | None = Field(None, description="the key of a keyed upsert, else null")


class TreeOut(BaseModel):
    knowledge_base_id: uuid.UUID
    items: list[TreeItem]


class TrashItem(Out):
    id: uuid.UUID
    parent_id: uuid.UUID | None
    type: str
    title: str
    deleted_at: datetime | None


class TrashOut(BaseModel):
    items: list[TrashItem]


@router.get("/api/knowledge-bases", response_model=KnowledgeBaseList, responses=error_responses(401, 403, 422))
def list_knowledge_bases(
    session: SessionDep, principal: PrincipalDep, workspace_id: uuid.UUID | None = None
) -> dict[str, Any]:
    """Knowledge bases the caller can read (in its tenant), optionally of one workspace."""
    return {"items": kb_service.list_knowledge_bases(session, principal, workspace_id=workspace_id)}


@router.post(
    "/api/knowledge-bases", status_code=status.HTTP_201_CREATED, response_model=KnowledgeBaseOut, responses=_KB_WRITE
)
def create_knowledge_base(body: KnowledgeBaseIn, session: SessionDep, actor: KbWriterDep) -> dict[str, Any]:
    """The caller becomes the owner collaborator."""
    kb = kb_service.create_knowledge_base(
        session,
        actor,
        workspace_id=body.workspace_id,
        title=body.title,
        slug=body.slug,
        description=body.description,
        visibility=body.visibility,
        settings=body.settings,
    )
    return kb_service.get_knowledge_base(session, actor.principal, kb.id)


@router.get("/api/knowledge-bases/{kb_id}", response_model=KnowledgeBaseOut, responses=_READ)
def get_knowledge_base(kb_id: uuid.UUID, session: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    return kb_service.get_knowledge_base(session, principal, kb_id)


@router.put("/api/knowledge-bases/{kb_id}", response_model=KnowledgeBaseOut, responses=_KB_WRITE)
def update_knowledge_base(
    kb_id: uuid.UUID, body: KnowledgeBaseUpdate, session: SessionDep, actor: KbWriterDep
) -> dict[str, Any]:
    fields = {k: getattr(body, k) for k in body.model_fields_set}
    kb_service.update_knowledge_base(session, actor, kb_id, fields)
    return kb_service.get_knowledge_base(session, actor.principal, kb_id)


@router.get("/api/knowledge-bases/{kb_id}/tree", response_model=TreeOut, responses=_READ)
def get_tree(kb_id: uuid.UUID, session: SessionDep, principal: PrincipalDep) -> Response:
    """Folders and pages the caller can see, flat, in sibling order (``sort_order``). An item whose
    parent is hidden from the caller hangs under its nearest visible ancestor (or the root)."""
    items = tree_service.get_tree(session, principal, kb_id)
    # The items are already JSON values (string ids, words, ints): validating thousands of them
    # into models and dumping them again cost more than building the tree, so they go out as is,
    # in the shape TreeOut documents (tests/api check it against the schema).
    body = json.dumps({"knowledge_base_id": str(kb_id), "items": items}, ensure_ascii=False, separators=(",", ":"))
    return Response(body, media_type="application/json")


@router.get("/api/knowledge-bases/{kb_id}/trash", response_model=TrashOut, responses=_READ)
def list_trash(kb_id: uuid.UUID, session: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    """Deleted documents (roots of deleted subtrees) the caller may restore or purge (managers)."""
    return {"items": tree_service.list_trash(session, principal, kb_id)}


# --- documents ----------------------------------------------------------------------------------


class DocumentIn(RequestModel):
    knowledge_base_id: uuid.UUID
    parent_id: uuid.UUID | None = None
    type: Literal["page", "folder"] = "page"
    title: str = Field(description="1-1000 characters (TITLE_TOO_LONG beyond)")
    markdown: str | None = Field(None, description="pages only; at most 5,000,000 characters")
    markdown_hash: str | None = Field(None, max_length=128, description="optional SHA-256 (hex) of markdown")
    status: Literal["draft", "published"] | None = None
    metadata: dict[str, Any] | None = Field(None, description="JSON object, at most 64 KB")
    tags: list[str] | None = None
    sort_order: int | None = Field(None, ge=0, le=MAX_SORT, description="position among siblings; default last")
    on_unsupported: Literal["reject", "convert"] = Field(
        "reject",
        description=(
            "Markdown the editor cannot keep (front matter, raw HTML, <br>): reject with MARKDOWN_DIALECT_ERROR, or "
            "convert it as an import does and answer the repairs in warnings (docs/importing.md#api-writers)"
        ),
    )


class DocumentUpdate(RequestModel):
    """Document properties; the body is not one of them (it is versioned, with a conflict check)."""

    unknown_field_hints: ClassVar[dict[str, str]] = {
        "markdown": "the Markdown body is saved as a new version with POST /api/documents/{id}/versions",
        "markdown_hash": "sent with the Markdown to POST /api/documents/{id}/versions",
    }

    title: str | None = None
    parent_id: uuid.UUID | None = Field(None, description="new parent (null = knowledge-base root)")
    sort_order: int | None = Field(None, ge=0, le=MAX_SORT, description="0-based position among the siblings")
    before_id: uuid.UUID | None = Field(
        None, description="place just before this sibling (under the new parent), instead of sort_order"
    )
    after_id: uuid.UUID | None = Field(
        None, description="place just after this sibling (under the new parent), instead of sort_order"
    )
    status: Literal["draft", "published", "archived"] | None = None
    permission_mode: Literal["inherit", "custom"] | None = None
    visibility: Visibility | None = None
    metadata: dict[str, Any] | None = None
    tags: list[str] | None = None


class PathItem(BaseModel):
    id: uuid.UUID
    title: str
    type: str


class DocumentOut(Out):
    id: uuid.UUID
    knowledge_base_id: uuid.UUID
    parent_id: uuid.UUID | None
    type: str
    title: str
    status: str
    current_version_id: uuid.UUID | None
    version_no: int | None
    markdown: str | None
    metadata: dict[str, Any]
    index_status: str = Field(description="pending (the latest save is not searchable yet), indexed or failed")
    index_error: str | None = Field(None, description="why the last index run failed (index_status failed)")
    tags: list[str]
    path: list[PathItem] | None = None
    permission_mode: str
    visibility: str | None
    updated_at: datetime
    capabilities: list[str] | None = Field(
        None, description=("what the caller may do to it (read, edit, create_child, move, delete, manage, share, ...)")
    )


class VersionIn(RequestModel):
    base_version_id: uuid.UUID | None = Field(None, description="the version the edit started from")
    base_version_no: int | None = Field(None, ge=1, le=2_147_483_647, description="alternative to base_version_id")
    title: str | None = Field(None, description="new title (default: unchanged)")
    markdown: str
    markdown_hash: str = Field(max_length=128, description="lowercase hex SHA-256 of the UTF-8 markdown sent")


class SaveOut(Out):
    status: Literal["created", "unchanged"]
    document_id: uuid.UUID
    version_id: uuid.UUID
    version_no: int
    markdown_hash: str
    index_status: str = Field(description="the page's index status after this save (pending until it is searchable)")


class VersionSummary(Out):
    id: uuid.UUID
    version_no: int
    title: str
    markdown_hash: str
    source_type: str
    created_at: datetime
    created_by: uuid.UUID | None = Field(None, description="the author's user id")
    created_by_name: str | None = Field(None, description="the author's display name (in the version list)")
    chars: int | None = Field(None, description="the body's length in characters (in the version list)")


class VersionList(BaseModel):
    items: list[VersionSummary]


class VersionDetail(VersionSummary):
    markdown: str


class ComparedVersion(BaseModel):
    id: uuid.UUID
    version_no: int
    title: str
    created_by_name: str | None = Field(None, description="the author's display name")
    created_at: datetime


class VersionDiff(BaseModel):
    document_id: uuid.UUID
    knowledge_base_id: uuid.UUID
    title: str = Field(description="the page's title at to_no")
    from_version: ComparedVersion | None = Field(description="null: version 1 compared with an empty page")
    to_version: ComparedVersion
    saves: int = Field(description="versions saved after from_version up to to_version")
    authors: list[str] = Field(description="who saved them (display names), first saver first")
    title_changed: bool
    added_lines: int
    removed_lines: int
    diff: str = Field(description="unified diff (`diff -u`, 3 lines of context) of the Markdown; empty when equal")


class RestoreIn(RequestModel):
    base_version_id: uuid.UUID | None = Field(None, description="optional optimistic lock")


class UpsertIn(RequestModel):
    title: str
    markdown: str | None = None
    markdown_hash: str | None = Field(None, max_length=128)
    type: Literal["page", "folder"] = Field("page", description="used when the document is created")
    parent_id: uuid.UUID | None = Field(None, description="omitted: unchanged (root when created)")
    status: Literal["draft", "published", "archived"] | None = None
    metadata: dict[str, Any] | None = None
    tags: list[str] | None = None
    on_unsupported: Literal["reject", "convert"] = Field(
        "reject",
        description=("reject Markdown the editor cannot keep, or convert it and answer the repairs in warnings"),
    )


class UpsertOut(Out):
    status: Literal["created", "updated", "unchanged"]
    document_id: uuid.UUID
    version_id: uuid.UUID | None


class PurgeOut(BaseModel):
    purged: list[uuid.UUID]


_UNCHANGED: dict[int | str, dict[str, Any]] = {
    200: {"model": SaveOut, "description": "unchanged: identical to the current version"}
}
_BODY_CHECKS = (MarkdownTooLarge, MarkdownDialectError, HashMismatch)
_DOC_FIELDS = (
    TitleTooLong,
    MetadataTooLarge,
    ValueOutOfRange,
    TooManyTags,
    InvalidMove,
    FolderDepthExceeded,
    DocumentInTrash,  # a parent in the trash
)
_SAVE_RESPONSES = {**errors_for(_WRITE, VersionConflict, NotAPage, TitleTooLong, *_BODY_CHECKS), **_UNCHANGED}
_RESTORE_RESPONSES = {**errors_for(_WRITE, VersionConflict, NotAPage), **_UNCHANGED}


@router.post(
    "/api/documents",
    status_code=status.HTTP_201_CREATED,
    response_model=DocumentOut,
    responses=errors_for(_WRITE, *_DOC_FIELDS, *_BODY_CHECKS),
)
def create_document(body: DocumentIn, session: SessionDep, actor: DocWriterDep) -> dict[str, Any]:
    """With ``on_unsupported: "convert"`` the answer also has ``warnings``: the repairs made."""
    warnings: list[str] = []
    doc, _ = doc_service.create_document(
        session,
        actor,
        knowledge_base_id=body.knowledge_base_id,
        parent_id=body.parent_id,
        type=body.type,
        title=body.title,
        markdown=body.markdown,
        markdown_hash=body.markdown_hash,
        status=body.status,
        metadata=body.metadata,
        tags=body.tags,
        sort_order=body.sort_order,
        on_unsupported=body.on_unsupported,
        warnings=warnings,
    )
    out = doc_service.get_document(session, actor.principal, doc.id)
    return {**out, "warnings": warnings} if body.on_unsupported == "convert" else out


class DuplicateIn(RequestModel):
    title: str | None = Field(None, description='the copy\'s title; default "<title> (copy)"')
    with_children: bool = Field(
        False, description="copy the pages and folders under it too (what the caller may read); required for a folder"
    )
    knowledge_base_id: uuid.UUID | None = Field(
        None, description="copy into this knowledge base (at its top, or under parent_id) instead of beside the page"
    )
    parent_id: uuid.UUID | None = Field(
        None, description="copy under this folder or page (last among what is there) instead of beside the page"
    )


@router.post(
    "/api/documents/{doc_id}/duplicate",
    status_code=status.HTTP_201_CREATED,
    response_model=DocumentOut,
    # bodies are copied as stored: only their size is checked again, never their dialect or hash
    responses=errors_for(_WRITE, *_DOC_FIELDS, MarkdownTooLarge, DuplicateTooLarge),
)
def duplicate_document(
    doc_id: uuid.UUID, session: SessionDep, actor: DocWriterDep, body: DuplicateIn | None = None
) -> dict[str, Any]:
    """A copy of a page right after it: body, metadata, tags, status, its images (sharing their
    files) and, for a custom page, its permissions; with ``with_children``, what is under it too;
    elsewhere with ``knowledge_base_id``/``parent_id`` (docs/api.md#duplicating-a-page)."""
    b = body or DuplicateIn()
    doc, _ = doc_service.duplicate_document(
        session,
        actor,
        doc_id,
        title=b.title,
        with_children=b.with_children,
        knowledge_base_id=b.knowledge_base_id,
        parent_id=b.parent_id,
    )
    return doc_service.get_document(session, actor.principal, doc.id)


@router.get("/api/documents/{doc_id}", response_model=DocumentOut, responses=_READ)
def get_document(doc_id: uuid.UUID, session: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    return doc_service.get_document(session, principal, doc_id)


@router.put("/api/documents/{doc_id}", response_model=DocumentOut, responses=errors_for(_WRITE, *_DOC_FIELDS))
def update_document(
    doc_id: uuid.UUID, body: DocumentUpdate, session: SessionDep, actor: DocWriterDep
) -> dict[str, Any]:
    """Rename, move (``parent_id`` + ``sort_order``, ``before_id`` or ``after_id``), reorder, status, permission
    mode/visibility (managers), metadata, tags. Moving under itself or a descendant is
    ``INVALID_MOVE``; too deep is ``FOLDER_DEPTH_EXCEEDED``. Body edits are versions (POST .../versions)."""
    fields = {k: getattr(body, k) for k in body.model_fields_set}
    doc_service.update_document(session, actor, doc_id, fields)
    return doc_service.get_document(session, actor.principal, doc_id)


@router.delete(
    "/api/documents/{doc_id}", status_code=status.HTTP_204_NO_CONTENT, response_class=Response, responses=_WRITE
)
def delete_document(doc_id: uuid.UUID, session: SessionDep, actor: DocWriterDep) -> Response:
    """Move to the trash (restorable with ``POST /api/trash/{id}/restore``)."""
    doc_service.trash_document(session, actor, doc_id)
    return Response(status_code=204, headers={RUN_HEADER: str(actor.run_id)})


@router.get("/api/documents/{doc_id}/versions", response_model=VersionList, responses=_READ)
def list_versions(
    doc_id: uuid.UUID,
    session: SessionDep,
    principal: PrincipalDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    before_no: Annotated[int | None, Query(ge=1, le=2_147_483_647)] = None,
) -> dict[str, Any]:
    """Newest first; page with ``before_no``."""
    return {"items": version_service.list_versions(session, principal, doc_id, limit=limit, before_no=before_no)}


@router.post(
    "/api/documents/{doc_id}/versions",
    status_code=status.HTTP_201_CREATED,
    response_model=SaveOut,
    responses=_SAVE_RESPONSES,
)
def save_version(
    doc_id: uuid.UUID, body: VersionIn, session: SessionDep, actor: DocWriterDep, response: Response
) -> dict[str, Any]:
    """Save with optimistic locking: 409 ``VERSION_CONFLICT`` (with ``current_version_id``) when the
    base is stale, 422 ``MARKDOWN_HASH_MISMATCH`` / ``MARKDOWN_DIALECT_ERROR``; identical content
    is 200 ``unchanged`` (no version, no index job)."""
    res = version_service.save_version(
        session,
        actor,
        doc_id,
        base_version_id=body.base_version_id,
        base_version_no=body.base_version_no,
        title=body.title,
        markdown=body.markdown,
        markdown_hash=body.markdown_hash,
    )
    if res.status == "unchanged":
        response.status_code = status.HTTP_200_OK
    return res.out()


@router.get("/api/documents/{doc_id}/versions/{version_id}", response_model=VersionDetail, responses=_READ)
def get_version(
    doc_id: uuid.UUID, version_id: uuid.UUID, session: SessionDep, principal: PrincipalDep
) -> dict[str, Any]:
    return version_service.get_version(session, principal, doc_id, version_id)


@router.get(
    "/api/documents/{doc_id}/diff",
    response_model=VersionDiff,
    responses=errors_for(_READ, NotAPage, TooManyChanges),
)
def compare_versions(
    doc_id: uuid.UUID,
    session: SessionDep,
    principal: PrincipalDep,
    from_no: Annotated[
        int | None, Query(ge=0, le=2_147_483_647, description="default: the version before to_no; 0: an empty page")
    ] = None,
    to_no: Annotated[int | None, Query(ge=1, le=2_147_483_647, description="default: the current version")] = None,
    since: Annotated[
        datetime | None,
        Query(description="instead of from_no: from the version current at this time (ISO 8601; UTC without a zone)"),
    ] = None,
) -> dict[str, Any]:
    """What changed from one version of a page to another, as a unified diff of the Markdown
    (docs/api.md#comparing-versions): 404 for a page the caller may not read or a version it
    lacks, ``TOO_MANY_CHANGES`` past the server's bound."""
    return compare_service.compare_versions(session, principal, doc_id, from_no=from_no, to_no=to_no, since=since)


@router.post(
    "/api/documents/{doc_id}/restore/{version_id}",
    status_code=status.HTTP_201_CREATED,
    response_model=SaveOut,
    responses=_RESTORE_RESPONSES,
)
def restore_version(
    doc_id: uuid.UUID,
    version_id: uuid.UUID,
    session: SessionDep,
    actor: DocWriterDep,
    response: Response,
    body: RestoreIn | None = None,
) -> dict[str, Any]:
    """A new version with the old version's body and title (200 ``unchanged`` if identical)."""
    res = version_service.restore_version(
        session, actor, doc_id, version_id, base_version_id=body.base_version_id if body else None
    )
    if res.status == "unchanged":
        response.status_code = status.HTTP_200_OK
    return res.out()


KeyPath = Annotated[
    str,
    Path(
        min_length=1,
        description=("the caller's stable key, at most 1,000 characters (NAME_TOO_LONG beyond); may contain /"),
    ),
]


@router.put(
    "/api/knowledge-bases/{kb_id}/documents/by-key/{key:path}",
    response_model=UpsertOut,
    responses=errors_for(_WRITE, DocumentInTrash, NameTooLong, *_DOC_FIELDS, *_BODY_CHECKS),
)
def upsert_by_key(
    kb_id: uuid.UUID, key: KeyPath, body: UpsertIn, session: SessionDep, actor: DocWriterDep
) -> dict[str, Any]:
    """Idempotent keyed write for integrations: ``created`` | ``updated`` | ``unchanged`` (writes and
    enqueues nothing). Fields left out keep their values. ``DOCUMENT_IN_TRASH`` (409) for a
    trashed keyed document. With ``on_unsupported: "convert"`` a repaired body adds ``warnings``."""
    parent: Any = body.parent_id if "parent_id" in body.model_fields_set else upsert_service.UNSET
    res = upsert_service.upsert_by_key(
        session,
        actor,
        kb_id,
        key,
        title=body.title,
        markdown=body.markdown,
        markdown_hash=body.markdown_hash,
        type=body.type,
        parent_id=parent,
        status=body.status,
        metadata=body.metadata,
        tags=body.tags,
        on_unsupported=body.on_unsupported,
    )
    return res.out()


@router.get("/api/knowledge-bases/{kb_id}/documents/by-key/{key:path}", response_model=DocumentOut, responses=_READ)
def get_by_key(kb_id: uuid.UUID, key: KeyPath, session: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    return doc_service.get_by_key(session, principal, kb_id, key)


class RecentDocument(BaseModel):
    id: uuid.UUID
    knowledge_base_id: uuid.UUID
    knowledge_base_title: str | None = Field(description="null when the caller cannot open the knowledge base")
    title: str
    type: str
    edited_at: datetime = Field(description="the caller's latest save of it")


class RecentList(BaseModel):
    items: list[RecentDocument]


@router.get("/api/me/recent-documents", response_model=RecentList, responses=error_responses(401, 422))
def recent_documents(
    session: SessionDep, principal: UserDep, limit: Annotated[int, Query(ge=1, le=recent_service.MAX_LIMIT)] = 20
) -> dict[str, Any]:
    """The documents the caller saved most recently and can still read, newest first (the web
    app's home page)."""
    return {"items": recent_service.recent_documents(session, principal, limit=limit)}


class SharedBy(BaseModel):
    id: uuid.UUID
    display_name: str


class SharedDocument(BaseModel):
    id: uuid.UUID
    knowledge_base_id: uuid.UUID
    knowledge_base_title: str | None = Field(description="null when the caller cannot open the knowledge base")
    title: str
    type: str
    role: str = Field(description="the strongest role granted on it, to the caller or a group of theirs")
    shared_at: datetime = Field(description="when the newest of those grants was made")
    shared_by: SharedBy | None = Field(description="who made it (null: an account since deleted)")


class SharedList(BaseModel):
    items: list[SharedDocument]


@router.get("/api/me/shared-documents", response_model=SharedList, responses=error_responses(401, 422))
def shared_documents(
    session: SessionDep, principal: UserDep, limit: Annotated[int, Query(ge=1, le=recent_service.MAX_LIMIT)] = 20
) -> dict[str, Any]:
    """Documents shared with the caller as a collaborator (directly or through a group) that they
    can still read, newest share first (the web app's home page)."""
    return {"items": recent_service.shared_documents(session, principal, limit=limit)}


@router.post(
    "/api/trash/{doc_id}/restore", response_model=DocumentOut, responses=errors_for(_WRITE, NotInTrash, DocumentInTrash)
)
def restore_from_trash(doc_id: uuid.UUID, session: SessionDep, actor: DocWriterDep) -> dict[str, Any]:
    """Back to its previous status (to the root if its parent is still in the trash, for those who
    may create there; others get 409 ``DOCUMENT_IN_TRASH``: restore the folder first)."""
    doc_service.restore_from_trash(session, actor, doc_id)
    return doc_service.get_document(session, actor.principal, doc_id)


@router.delete("/api/trash/{doc_id}", response_model=PurgeOut, responses=errors_for(_WRITE, NotInTrash))
def purge(doc_id: uuid.UUID, session: SessionDep, actor: DocWriterDep) -> dict[str, Any]:
    """Remove a trashed document and its subtree for good (a revert of the run re-creates them)."""
    return {"purged": doc_service.purge_document(session, actor, doc_id)}
