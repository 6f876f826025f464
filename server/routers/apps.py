"""/api/apps/v1: apps on a person's knowledge (docs/apps.md). Thin adapter over ``openkb.apps``.

Two kinds of caller:

* the **user** (session cookie or ``kbpat_`` token) registers apps, installs them, switches
  their permission strings, picks ``user-selected`` collections, uninstalls:
  ``/api/apps/v1/apps``, ``/api/apps/v1/installations/...``;
* the **app** (``Authorization: Bearer kbapp_...``) calls the knowledge methods:
  ``/api/apps/v1/knowledge/<method>`` (``POST``, one per method of docs/apps.md#api).

The app credential is resolved here, not in ``server.auth``: a ``kbapp_`` token is only ever
valid on the knowledge routes (everywhere else it is an unknown bearer token, 401).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from openkb.apps import changes as app_changes
from openkb.apps import knowledge, registry, uninstall
from openkb.apps import oauth as app_oauth
from openkb.apps.registry import AppCaller
from openkb.errors import (
    AlreadyExists,
    AppQuotaExceeded,
    CollectionNotNestable,
    InvalidPermissionString,
    KnowledgePermissionMissing,
    MarkdownDialectError,
    MarkdownTooLarge,
    MetadataTooLarge,
    NameTooLong,
    NotRevertible,
    RevertConflict,
    SourceUriNotAllowed,
    TitleTooLong,
    Unauthenticated,
)
from openkb.facts import search as facts_search
from server.auth import UserDep, check_any_scope, unauthenticated
from server.deps import CtxDep, SessionDep
from server.errors import errors_for
from server.routers.changes import ChangeOut
from server.schemas import RequestModel

router = APIRouter(tags=["apps"])
P = "/api/apps/v1"
WRITE_ERRORS = (
    KnowledgePermissionMissing,
    AppQuotaExceeded,
    MarkdownTooLarge,
    TitleTooLong,
    NameTooLong,
    MetadataTooLarge,
    MarkdownDialectError,
)


def _writer(principal: UserDep) -> Any:
    check_any_scope(principal, "kb:write", "doc:write")
    return principal


WriterDep = Annotated[Any, Depends(_writer)]


def _refused(ctx: Any, detail: str) -> Any:
    """401 with the RFC 9728 challenge: an OAuth client finds the apps API's resource metadata
    (and so the authorization server) from it (docs/apps.md#oauth)."""
    exc = unauthenticated(detail)
    prm = ctx.settings.app_base_url.strip().rstrip("/") + "/.well-known/oauth-protected-resource" + app_oauth.API_PATH
    exc.headers = {"WWW-Authenticate": f'Bearer resource_metadata="{prm}"'}
    return exc


def app_token(request: Request, ctx: CtxDep) -> str:
    """The bearer credential's text (401 before the body is even looked at when absent)."""
    h = request.headers.get("authorization") or ""
    scheme, _, token = h.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _refused(ctx, "send 'Authorization: Bearer kbapp_...' (or an OAuth access token)")
    return token.strip()


TokenDep = Annotated[str, Depends(app_token)]


def _resolve(session: Any, ctx: Any, token: str, keyed: tuple[str | None, str | None] | None = None) -> AppCaller:
    try:
        if token.startswith("kbat_"):  # an OAuth grant of the installation's client (docs/apps.md#oauth)
            resource = app_oauth.apps_resource(ctx.settings.app_base_url)
            return app_oauth.resolve_oauth_caller(
                session, token, resource=resource, secret=ctx.settings.secret_key, keyed=keyed
            )
        return registry.resolve_caller(session, token, ctx.settings.secret_key, keyed=keyed)
    except Unauthenticated as e:
        raise _refused(ctx, e.detail) from None


def app_caller(token: TokenDep, session: SessionDep, ctx: CtxDep) -> AppCaller:
    """The installation behind ``Authorization: Bearer kbapp_...``, with its grants as of now."""
    return _resolve(session, ctx, token)


CallerDep = Annotated[AppCaller, Depends(app_caller)]


# --- management (the user) ----------------------------------------------------------------------


class PredicateIn(RequestModel):
    predicate: str = Field(min_length=1, max_length=200)
    cardinality: Literal["one", "many"] = "many"
    description: str = Field(min_length=1, max_length=200)
    aliases: list[str] = Field(default_factory=list, max_length=20)


class AppIn(RequestModel):
    name: str = Field(min_length=1, max_length=1000)
    description: str = Field("", max_length=1000)
    permissions: list[str] = Field(default_factory=list, max_length=100)
    predicates: list[PredicateIn] = Field(default_factory=list, max_length=100)
    reason: str | None = Field(None, max_length=1000)
    hosts: list[str] = Field(default_factory=list, max_length=50, description="permissions.network.hosts")


class AppOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: uuid.UUID
    name: str
    description: str
    permissions: list[dict[str, Any]]
    status: str
    created_at: datetime


class AppList(BaseModel):
    items: list[AppOut]


@router.post(
    f"{P}/apps",
    status_code=201,
    response_model=AppOut,
    responses=errors_for(401, 403, 422, AlreadyExists, InvalidPermissionString, NameTooLong),
)
def register_app(body: AppIn, session: SessionDep, principal: WriterDep) -> dict[str, Any]:
    """Register an app with its manifest; every permission string is checked as at install."""
    app = registry.register_app(
        session, principal, name=body.name, description=body.description, permissions=body.permissions,
        predicates=[p.model_dump() for p in body.predicates], reason=body.reason, hosts=body.hosts,
    )  # fmt: skip
    return registry.app_out(app)


@router.get(f"{P}/apps", response_model=AppList, responses=errors_for(401))
def list_apps(session: SessionDep, principal: UserDep) -> dict[str, Any]:
    return {"items": [registry.app_out(a) for a in registry.list_apps(session, principal)]}


class InstallIn(RequestModel):
    app: str = Field(min_length=1, max_length=1000, description="the app's id or name")


class AppGrantOut(BaseModel):
    permission: str
    enabled: bool = Field(description="the user's switch (off at install)")
    sentences: dict[str, str] = Field(description="the string as a sentence, by language (zh-CN, en)")


class AppSelectedOut(BaseModel):
    knowledge_base_id: uuid.UUID
    document_id: uuid.UUID | None = Field(description="a folder; null: the whole knowledge base")


class InstalledAppOut(BaseModel):
    id: uuid.UUID
    name: str
    description: str
    reason: str | None


class InstallationOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: uuid.UUID
    app: InstalledAppOut
    status: Literal["active", "uninstalled"]
    created_at: datetime
    uninstall_mode: str | None = None
    uninstall_run_id: uuid.UUID | None = None
    last_used_at: datetime | None = Field(
        None, description="the app's latest call with its credential, to the minute (null: never used)"
    )
    grants: list[AppGrantOut]
    selected_collections: list[AppSelectedOut]
    contributions: dict[str, int] = Field(description="documents, collections and facts the app contributed")


class InstalledOut(BaseModel):
    installation: InstallationOut
    credential: str = Field(description="the kbapp_ credential, shown once")


class InstallationList(BaseModel):
    items: list[InstallationOut]


@router.post(
    f"{P}/installations",
    status_code=201,
    response_model=InstalledOut,
    responses=errors_for(401, 403, 404, 422, AlreadyExists),
)
def install(body: InstallIn, session: SessionDep, principal: WriterDep) -> dict[str, Any]:
    """Install for the caller: every permission string switched **off**; the credential once."""
    done = registry.install_app(session, principal, body.app)
    return {"installation": registry.installation_out(session, done.installation), "credential": done.credential}


@router.get(f"{P}/installations", response_model=InstallationList, responses=errors_for(401))
def list_installations(session: SessionDep, principal: UserDep, include_uninstalled: bool = False) -> dict[str, Any]:
    return {"items": registry.list_installations(session, principal, include_uninstalled=include_uninstalled)}


@router.get(f"{P}/installations/{{installation_id}}", response_model=InstallationOut, responses=errors_for(401, 404))
def get_installation(installation_id: uuid.UUID, session: SessionDep, principal: UserDep) -> dict[str, Any]:
    return registry.installation_out(session, registry.access_installation(session, principal, installation_id))


class GrantIn(RequestModel):
    permission: str = Field(min_length=1, max_length=200)
    enabled: bool


@router.put(
    f"{P}/installations/{{installation_id}}/grants",
    response_model=InstallationOut,
    responses=errors_for(401, 403, 404, 422),
)
def set_grant(installation_id: uuid.UUID, body: GrantIn, session: SessionDep, principal: WriterDep) -> dict[str, Any]:
    """Switch one permission string on or off: the app's next call sees it."""
    registry.set_grant(session, principal, installation_id, body.permission, body.enabled)
    return registry.installation_out(session, registry.access_installation(session, principal, installation_id))


class SelectedIn(RequestModel):
    knowledge_base_id: uuid.UUID | None = None
    document_id: uuid.UUID | None = Field(None, description="a folder; its knowledge base is implied")


class SelectedListIn(RequestModel):
    collections: list[SelectedIn] = Field(max_length=500)


@router.put(
    f"{P}/installations/{{installation_id}}/collections",
    response_model=InstallationOut,
    responses=errors_for(401, 403, 404, 422),
)
def set_collections(
    installation_id: uuid.UUID, body: SelectedListIn, session: SessionDep, principal: WriterDep
) -> dict[str, Any]:
    """The user's ``user-selected`` collections for this installation (replaces the list)."""
    registry.set_selected_collections(session, principal, installation_id, [c.model_dump() for c in body.collections])
    return registry.installation_out(session, registry.access_installation(session, principal, installation_id))


class InstallationChangeList(BaseModel):
    items: list[ChangeOut]


@router.get(
    f"{P}/installations/{{installation_id}}/changes",
    response_model=InstallationChangeList,
    responses=errors_for(401, 404),
)
def installation_changes(
    installation_id: uuid.UUID, session: SessionDep, principal: UserDep, limit: Annotated[int, Query(ge=1, le=200)] = 50
) -> dict[str, Any]:
    """What this installation wrote, newest first; revert with ``POST /api/changes/revert``."""
    return {"items": app_changes.installation_changes(session, principal, installation_id, limit=limit)}


class CredentialOut(BaseModel):
    credential: str


@router.post(
    f"{P}/installations/{{installation_id}}/credential",
    response_model=CredentialOut,
    responses=errors_for(401, 403, 404, 422),
)
def rotate(installation_id: uuid.UUID, session: SessionDep, principal: WriterDep) -> dict[str, Any]:
    """A new credential; the old one fails on its next use."""
    return {"credential": registry.rotate_credential(session, principal, installation_id)}


class OAuthClientIn(RequestModel):
    redirect_uris: list[str] = Field(min_length=1, max_length=20)


class OAuthClientOut(BaseModel):
    client_id: str
    redirect_uris: list[str]
    scope: str = Field(description="always 'apps'")
    resource: str = Field(description="the RFC 8707 resource to ask for: <APP_BASE_URL>/api/apps/v1")
    token_endpoint_auth_method: str = Field(description="none: a public client, PKCE S256")


def _client_out(row: Any, ctx: Any) -> dict[str, Any]:
    return {
        "client_id": row.client_id,
        "redirect_uris": list(row.redirect_uris),
        "scope": " ".join(row.allowed_scopes),
        "resource": app_oauth.apps_resource(ctx.settings.app_base_url),
        "token_endpoint_auth_method": "none",
    }


@router.put(
    f"{P}/installations/{{installation_id}}/oauth-client",
    response_model=OAuthClientOut,
    responses=errors_for(401, 403, 404, 422),
)
def set_oauth_client(
    installation_id: uuid.UUID, body: OAuthClientIn, session: SessionDep, principal: WriterDep, ctx: CtxDep
) -> dict[str, Any]:
    """The installation's OAuth client (created, or its redirect URIs replaced; the client_id
    stays): the app then gets a ``kbat_`` token by authorization code + PKCE instead of a
    ``kbapp_`` credential (docs/apps.md#oauth)."""
    return _client_out(
        app_oauth.set_oauth_client(session, principal, installation_id, redirect_uris=body.redirect_uris), ctx
    )


@router.get(
    f"{P}/installations/{{installation_id}}/oauth-client",
    response_model=OAuthClientOut,
    responses=errors_for(401, 404),
)
def get_oauth_client(
    installation_id: uuid.UUID, session: SessionDep, principal: UserDep, ctx: CtxDep
) -> dict[str, Any]:
    return _client_out(app_oauth.get_oauth_client(session, principal, installation_id), ctx)


class UninstallIn(RequestModel):
    mode: Literal["keep", "delete"] = "keep"


class UninstallOut(BaseModel):
    mode: str
    run_id: uuid.UUID | None = Field(description="the run of a delete; revert it to bring the content back")
    contributions: dict[str, int]
    deleted: dict[str, int]


@router.post(
    f"{P}/installations/{{installation_id}}/uninstall",
    response_model=UninstallOut,
    responses=errors_for(401, 403, 404, 422),
)
def uninstall_app(
    installation_id: uuid.UUID, body: UninstallIn, session: SessionDep, principal: WriterDep
) -> dict[str, Any]:
    return uninstall.uninstall(session, principal, installation_id, body.mode)


class UninstallRevertOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    run_id: uuid.UUID
    reverted: list[dict[str, Any]]
    skipped: list[dict[str, Any]]


@router.post(
    f"{P}/installations/{{installation_id}}/revert-uninstall",
    response_model=UninstallRevertOut,
    responses=errors_for(401, 403, 404, 409, 422, RevertConflict, NotRevertible),
)
def revert_uninstall(
    installation_id: uuid.UUID, session: SessionDep, principal: WriterDep, ctx: CtxDep
) -> dict[str, Any]:
    """Bring back what a delete-uninstall removed (the app stays uninstalled)."""
    return uninstall.revert_uninstall(session, principal, installation_id, blobs=ctx.blobs)


# --- the knowledge methods (the app) ------------------------------------------------------------


class TimeRangeIn(RequestModel):
    from_: int | str | None = Field(None, alias="from")
    to: int | str | None = None
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class EmptyIn(RequestModel):
    """No parameters (an unknown field is still refused)."""


class CollectionOut(BaseModel):
    ref: str
    name: str
    builtin: str | None
    kind: str
    canWrite: bool  # noqa: N815 - the wire names of docs/apps.md
    parent: str | None


class CollectionList(BaseModel):
    items: list[CollectionOut]


@router.post(f"{P}/knowledge/collections.list", response_model=CollectionList, responses=errors_for(401))
def collections_list(session: SessionDep, caller: CallerDep, body: EmptyIn | None = None) -> dict[str, Any]:  # noqa: ARG001
    """Collections the app may read or write (flat; ``parent`` null when not listed)."""
    return {"items": knowledge.collections_list(session, caller)}


class CollectionCreateIn(RequestModel):
    name: str = Field(min_length=1, max_length=1000)
    parent: str | None = Field(None, max_length=100, description="'keep' or a collection ref")
    runId: str | None = Field(None, max_length=200)  # noqa: N815


@router.post(
    f"{P}/knowledge/collections.create",
    status_code=201,
    responses=errors_for(401, 404, 422, CollectionNotNestable, *WRITE_ERRORS),
)
def collections_create(body: CollectionCreateIn, session: SessionDep, caller: CallerDep, ctx: CtxDep) -> dict[str, Any]:
    return knowledge.collections_create(
        session, caller, body.name, parent=body.parent, run_id=body.runId, settings=ctx.settings
    )


class UpsertIn(RequestModel):
    collection: str | None = Field(None, max_length=100)
    key: str | None = Field(None, min_length=1, max_length=1000)
    ref: str | None = Field(None, max_length=100)
    title: str = Field(max_length=1000)
    body: str | None = None
    text: str | None = None
    sourceUri: str | None = Field(None, max_length=4000)  # noqa: N815
    meta: dict[str, Any] | None = None
    origin: str | None = Field(None, max_length=200)
    source: str | None = Field(None, max_length=200)
    runId: str | None = Field(None, max_length=200)  # noqa: N815


class UpsertOut(BaseModel):
    status: Literal["created", "updated", "unchanged"]
    ref: str
    runId: str  # noqa: N815


@router.post(
    f"{P}/knowledge/documents.upsert",
    response_model=UpsertOut,
    responses=errors_for(401, 404, 409, 422, SourceUriNotAllowed, *WRITE_ERRORS),
)
def documents_upsert(body: UpsertIn, session: SessionDep, token: TokenDep, ctx: CtxDep) -> dict[str, Any]:
    """``key`` -> created|updated|unchanged (unchanged re-indexes nothing); ``ref`` -> update."""
    # the caller is resolved here, not as a dependency: a keyed write into diary/keep finds its
    # document in the credential's own statement (one round trip less, docs/apps.md#figures)
    caller = _resolve(session, ctx, token, (body.collection, body.key) if body.ref is None else None)
    return knowledge.documents_upsert(
        session, caller, collection=body.collection, key=body.key, ref=body.ref, title=body.title, body=body.body,
        text_=body.text, source_uri=body.sourceUri, meta=body.meta, origin=body.origin, source=body.source,
        run_id=body.runId, settings=ctx.settings,
    )  # fmt: skip


class RangeIn(RequestModel):
    from_: int | None = Field(None, alias="from", ge=0)
    to: int | None = Field(None, ge=0)
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class GetIn(RequestModel):
    ref: str = Field(max_length=100)
    range: RangeIn | None = None


@router.post(f"{P}/knowledge/documents.get", responses=errors_for(401, 404, KnowledgePermissionMissing))
def documents_get(body: GetIn, session: SessionDep, caller: CallerDep) -> dict[str, Any]:
    r = body.range
    return knowledge.documents_get(
        session, caller, body.ref, range_from=r.from_ if r else None, range_to=r.to if r else None
    )


class GetByKeyIn(RequestModel):
    collection: str = Field(max_length=100)
    key: str = Field(min_length=1, max_length=1000)


class MaybeDocOut(BaseModel):
    document: dict[str, Any] | None


@router.post(
    f"{P}/knowledge/documents.getByKey",
    response_model=MaybeDocOut,
    responses=errors_for(401, 404, KnowledgePermissionMissing),
)
def documents_get_by_key(body: GetByKeyIn, session: SessionDep, caller: CallerDep) -> dict[str, Any]:
    """``{"document": null}`` when there is none."""
    return {"document": knowledge.documents_get_by_key(session, caller, body.collection, body.key)}


class ListIn(RequestModel):
    collection: str = Field(max_length=100)
    timeRange: TimeRangeIn | None = None  # noqa: N815
    limit: int = Field(200, ge=1, le=1000)


@router.post(f"{P}/knowledge/documents.list", responses=errors_for(401, 404, 422, KnowledgePermissionMissing))
def documents_list(body: ListIn, session: SessionDep, caller: CallerDep) -> dict[str, Any]:
    """Documents directly in the collection (not its sub-collections), each with ``updatedAt``."""
    tr = body.timeRange
    return {
        "items": knowledge.documents_list(
            session,
            caller,
            body.collection,
            time_from=tr.from_ if tr else None,
            time_to=tr.to if tr else None,
            limit=body.limit,
        )  # fmt: skip
    }


class DeleteIn(RequestModel):
    ref: str = Field(max_length=100)
    runId: str | None = Field(None, max_length=200)  # noqa: N815


@router.post(
    f"{P}/knowledge/documents.delete", responses=errors_for(401, 404, KnowledgePermissionMissing, AppQuotaExceeded)
)
def documents_delete(body: DeleteIn, session: SessionDep, caller: CallerDep, ctx: CtxDep) -> dict[str, Any]:
    return knowledge.documents_delete(session, caller, body.ref, run_id=body.runId, settings=ctx.settings)


class SearchIn(RequestModel):
    query: str = Field("", max_length=2000)
    collections: list[str] | None = Field(None, max_length=100)
    timeRange: TimeRangeIn | None = None  # noqa: N815
    limit: int = Field(10, ge=1, le=100)
    entities: list[str] | None = Field(
        None, min_length=1, max_length=20, description="only passages mentioning these entity refs (docs/facts.md)"
    )


@router.post(f"{P}/knowledge/search", responses=errors_for(401, 422, 502, 503))
def search(body: SearchIn, session: SessionDep, caller: CallerDep, ctx: CtxDep) -> dict[str, Any]:
    """Only in granted collections (with their sub-collections); the rest is left out."""
    tr = body.timeRange
    if body.entities:  # passages mentioning the entities (docs/facts.md#mentions)
        items = facts_search.search(
            ctx, session, caller, body.query, entities=body.entities, collections=body.collections,
            time_from=tr.from_ if tr else None, time_to=tr.to if tr else None, limit=body.limit,
        )  # fmt: skip
        return {"items": items}
    return {
        "items": knowledge.search(
            ctx,
            session,
            caller,
            body.query,
            collections=body.collections,
            time_from=tr.from_ if tr else None,
            time_to=tr.to if tr else None,
            limit=body.limit,
        )  # fmt: skip
    }


class ChangesIn(RequestModel):
    since: int | str | None = None
    status: Literal["applied", "reverted", "conflict"] | None = None
    limit: int = Field(100, ge=1, le=500)


@router.post(f"{P}/knowledge/changes.list", responses=errors_for(401, 422))
def changes_list(body: ChangesIn, session: SessionDep, caller: CallerDep) -> dict[str, Any]:
    """Own changes; with ``changes.manage`` every writer's within the granted collections."""
    return {"items": app_changes.changes_list(session, caller, since=body.since, status=body.status, limit=body.limit)}


class ChangeRevertIn(RequestModel):
    ref: str | None = Field(None, max_length=100)
    runId: str | None = Field(None, max_length=200)  # noqa: N815


@router.post(
    f"{P}/knowledge/changes.revert",
    responses=errors_for(401, 404, 409, 422, KnowledgePermissionMissing, RevertConflict, NotRevertible),
)
def changes_revert(body: ChangeRevertIn, session: SessionDep, caller: CallerDep, ctx: CtxDep) -> dict[str, Any]:
    return app_changes.changes_revert(session, caller, ref=body.ref, run_id=body.runId, blobs=ctx.blobs)
