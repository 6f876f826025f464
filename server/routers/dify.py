"""Dify External Knowledge: ``POST /retrieval`` (Dify's wire format) and ``/api/admin/dify/*``.

``/retrieval`` answers in Dify's error shape ``{"error_code", "error_msg"}`` (table and parsing
in ``server/dify_wire.py``), never OpenKB's ``{"error", "detail"}`` and never a 422. It owns two
short units of work: the key/mapping/rate-limit phase commits before the search starts, so
concurrent calls of one key never wait on its row lock while another call searches.

The admin routes (tenant_admin of the caller's tenant, or system_admin with ``tenant_id``) use
OpenKB's usual error shape and audit every change.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from openkb.context import AppContext
from openkb.db import session_scope
from openkb.dify import keys as keys_svc
from openkb.dify import mappings as map_svc
from openkb.dify import service as svc
from openkb.dify.conditions import ConditionError
from openkb.errors import NotFound, OpenKBError, ServiceUnavailable
from server import dify_wire as wire
from server.auth import AdminDep, AdminScopeDep, client_ip, user_agent
from server.deps import CtxDep, SessionDep
from server.errors import errors_for
from server.schemas import RequestModel

log = logging.getLogger("openkb.dify")

router = APIRouter()


# --- POST /retrieval -----------------------------------------------------------------------------


class DifyRecord(BaseModel):
    content: str
    score: float
    title: str = Field(min_length=1)
    metadata: dict[str, Any]


class DifyRecords(BaseModel):
    records: list[DifyRecord]


def _inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with its ``$defs`` inlined (``#/$defs/..`` is not a valid
    reference inside an OpenAPI document)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(defs[ref.rsplit("/", 1)[-1]])
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)  # type: ignore[no-any-return]


def _dify_error(exc: wire.DifyError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers or None)


def _wire(exc: OpenKBError) -> wire.DifyError:
    err = wire.to_wire(exc)
    if err.status >= 500:
        log.warning("dify /retrieval: %s %s", exc.code, exc.detail)
    return err


def _handle(ctx: AppContext, authorization: str | None, raw: bytes, ip: str | None, ua: str | None) -> JSONResponse:
    t0 = time.perf_counter()
    try:
        token = wire.parse_authorization(authorization)
    except wire.DifyError as err:
        log.info("dify /retrieval -> %s %s (%s)", err.status, err.error_code, err.error_msg)
        return _dify_error(err)
    body_error: wire.DifyError | None = None
    parsed: wire.ParsedRequest | None = None
    try:
        parsed = wire.parse_body(raw)
    except wire.DifyError as exc:  # answered only once the key is known: no body oracle for strangers
        body_error = exc
    knowledge_id = parsed.knowledge_id if parsed else ""
    err: wire.DifyError | None = None
    caller: svc.Caller | None = None
    auth: svc.Authorized | None = None
    with session_scope(ctx.engine) as s:  # committed even on a refusal: rate-limit counter, audit
        try:
            caller = svc.identify(s, token, knowledge_id)
            auth = svc.authorize(s, ctx.settings, caller, knowledge_id)
        except OpenKBError as exc:
            err = _wire(exc)
        err = err or body_error
        if caller is not None and err is not None:
            svc.audit_call(
                s,
                key=caller.key,
                knowledge_id=knowledge_id,
                knowledge_base_id=caller.knowledge_base_id,
                status=err.status,
                error_code=err.error_code,
                error=err.error,
                ip=ip,
                user_agent=ua,
            )
        elif auth is not None and auth.knowledge_base_id is None:
            svc.audit_call(
                s,
                key=auth.key,
                knowledge_id="",
                knowledge_base_id=None,
                status=200,
                error_code=None,
                ip=ip,
                user_agent=ua,
                extra={"probe": True},
            )
    if err is not None:
        log.info("dify /retrieval -> %s %s (%s)", err.status, err.error_code, err.error_msg)
        return _dify_error(err)
    assert auth is not None and parsed is not None
    if auth.knowledge_base_id is None:
        return JSONResponse({"records": []})
    query = parsed.query
    try:
        with session_scope(ctx.engine) as s:
            out = svc.retrieve(ctx, s, auth, query)
            svc.audit_call(
                s,
                key=auth.key,
                knowledge_id=auth.knowledge_id,
                knowledge_base_id=auth.knowledge_base_id,
                status=200,
                error_code=None,
                ip=ip,
                user_agent=ua,
                document_ids=out.document_ids,
                extra={
                    "records": len(out.records),
                    "top_k": out.top_k,
                    "fetched": out.fetched,
                    "query_chars": len(query.query),
                    "query_truncated": out.query_truncated,
                    "pushed_tags": out.pushed_tags,
                    "metadata_condition": query.condition is not None,
                    "ms": round((time.perf_counter() - t0) * 1000, 1),
                },
            )
    except OpenKBError as exc:
        err = _wire(exc)
    except Exception:  # noqa: BLE001 - Dify must get its own error shape, never a bare 500
        log.exception("dify /retrieval failed")
        err = wire.internal_error()
    if err is not None:
        try:
            with session_scope(ctx.engine) as s:
                svc.audit_call(
                    s,
                    key=auth.key,
                    knowledge_id=auth.knowledge_id,
                    knowledge_base_id=auth.knowledge_base_id,
                    status=err.status,
                    error_code=err.error_code,
                    error=err.error,
                    ip=ip,
                    user_agent=ua,
                )
        except Exception:  # noqa: BLE001 - the audit of a failure must not mask it
            log.exception("dify /retrieval: could not audit a failed call")
        return _dify_error(err)
    return JSONResponse({"records": out.records})


@router.post(
    "/retrieval",
    tags=["dify"],
    response_model=DifyRecords,
    responses=wire.openapi_responses(),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _inline_schema(wire.RetrievalRequest)}},
        }
    },
)
async def retrieval(request: Request) -> JSONResponse:
    """Dify External Knowledge API. Register ``APP_BASE_URL`` (without ``/retrieval``) in Dify."""
    ctx: AppContext = request.app.state.ctx
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > wire.MAX_BODY_BYTES:
        return _dify_error(wire.too_large())
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():  # bounded read: a chunked body has no Content-Length
        size += len(part)
        if size > wire.MAX_BODY_BYTES:
            return _dify_error(wire.too_large())
        parts.append(part)
    raw = b"".join(parts)
    try:
        return await run_in_threadpool(
            _handle, ctx, request.headers.get("authorization"), raw, client_ip(request), user_agent(request)
        )
    except ServiceUnavailable as exc:
        return _dify_error(_wire(exc))
    except Exception:  # noqa: BLE001
        log.exception("dify /retrieval failed before the search")
        return _dify_error(wire.internal_error())


# Dify appends "/retrieval" to the registered endpoint without normalising it, so a base URL
# registered with a trailing slash arrives as "//retrieval", and one registered with the suffix
# (the most common mistake) as "/retrieval/retrieval". Both are served rather than answered
# with a 404, which would fail Dify's registration with no hint; `openkb dify info` still
# prints the canonical form.
for _alias in ("//retrieval", "/retrieval/retrieval"):
    router.add_api_route(_alias, retrieval, methods=["POST"], include_in_schema=False)


# --- /api/admin/dify -----------------------------------------------------------------------------

admin = APIRouter(prefix="/api/admin/dify", tags=["admin", "dify"])
_ERR = errors_for(401, 403, 404, 409, 422)
_KEY_WRITE = errors_for(_ERR, ConditionError)  # the key's metadata filter is a metadata_condition


class KeyOut(BaseModel):
    id: uuid.UUID
    name: str
    status: str = Field(description="active | disabled | revoked | expired")
    stored_status: str
    tenant_id: uuid.UUID
    knowledge_base_ids: list[uuid.UUID]
    metadata_filter: dict[str, Any]
    top_k_limit: int
    expires_at: datetime | None
    last_used_at: datetime | None
    created_by: uuid.UUID | None
    created_at: datetime | None
    updated_at: datetime | None


class KeyWithSecret(KeyOut):
    key: str = Field(description="the plaintext okdify_... key, shown once")


class KeyList(BaseModel):
    items: list[KeyOut]


class KeyIn(RequestModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    knowledge_base_ids: list[str] = Field(default_factory=list, description="ids or slugs; empty = sees nothing")
    top_k_limit: int = Field(keys_svc.DEFAULT_TOP_K_LIMIT, ge=1, le=keys_svc.MAX_TOP_K_LIMIT)
    expires_at: datetime | None = None
    metadata_filter: dict[str, Any] | None = Field(None, description="metadata_condition or {name: value|[values]}")


class KeyPatch(RequestModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, min_length=1, max_length=200)
    knowledge_base_ids: list[str] | None = None
    top_k_limit: int | None = Field(None, ge=1, le=keys_svc.MAX_TOP_K_LIMIT)
    expires_at: datetime | None = None
    metadata_filter: dict[str, Any] | None = None


class StatusOut(BaseModel):
    id: uuid.UUID
    before: str
    status: str


class MappingOut(BaseModel):
    id: uuid.UUID
    knowledge_id: str
    knowledge_base_id: uuid.UUID
    status: str
    tenant_id: uuid.UUID
    created_by: uuid.UUID | None
    created_at: datetime | None
    updated_at: datetime | None


class MappingList(BaseModel):
    items: list[MappingOut]


class MappingIn(RequestModel):
    model_config = ConfigDict(extra="forbid")

    knowledge_id: str = Field(min_length=1, max_length=map_svc.MAX_KNOWLEDGE_ID)
    knowledge_base_id: str = Field(min_length=1, description="id or slug")


class MappingResult(MappingOut):
    created: bool


TenantQ = Annotated[uuid.UUID | None, Query(description="system_admin only: another tenant")]


def _tenant(scope: Any, tenant_id: uuid.UUID | None) -> uuid.UUID:
    target = tenant_id or scope.tenant_id
    if not scope.can_manage_tenant(target):
        raise NotFound("no such tenant")
    return target  # type: ignore[no-any-return]


@admin.get("/keys", response_model=KeyList, responses=_ERR)
def list_keys(session: SessionDep, scope: AdminScopeDep, tenant_id: TenantQ = None) -> KeyList:
    rows = keys_svc.list_keys(session, _tenant(scope, tenant_id))
    return KeyList(items=[KeyOut(**keys_svc.key_view(r)) for r in rows])


@admin.post("/keys", status_code=status.HTTP_201_CREATED, response_model=KeyWithSecret, responses=_KEY_WRITE)
def create_key(
    body: KeyIn, session: SessionDep, principal: AdminDep, scope: AdminScopeDep, tenant_id: TenantQ = None
) -> KeyWithSecret:
    """The response is the only time the plaintext key is shown."""
    tid = _tenant(scope, tenant_id)
    row, plaintext = keys_svc.create_key(
        session,
        principal,
        tenant_id=tid,
        name=body.name,
        knowledge_base_ids=body.knowledge_base_ids,
        top_k_limit=body.top_k_limit,
        expires_at=body.expires_at,
        metadata_filters=body.metadata_filter,
    )
    return KeyWithSecret(**keys_svc.key_view(row), key=plaintext)


@admin.get("/keys/{key_id}", response_model=KeyOut, responses=_ERR)
def get_key(key_id: uuid.UUID, session: SessionDep, scope: AdminScopeDep, tenant_id: TenantQ = None) -> KeyOut:
    return KeyOut(**keys_svc.key_view(keys_svc.access_key(session, _tenant(scope, tenant_id), key_id)))


@admin.patch("/keys/{key_id}", response_model=KeyOut, responses=_KEY_WRITE)
def update_key(
    key_id: uuid.UUID,
    body: KeyPatch,
    session: SessionDep,
    principal: AdminDep,
    scope: AdminScopeDep,
    tenant_id: TenantQ = None,
) -> KeyOut:
    """Fields left out stay as they are; ``"expires_at": null`` removes the expiry."""
    tid = _tenant(scope, tenant_id)
    sent = body.model_dump(exclude_unset=True)
    row = keys_svc.do_update_key(
        session,
        principal,
        tid,
        key_id,
        name=sent.get("name"),
        knowledge_base_ids=sent.get("knowledge_base_ids"),
        top_k_limit=sent.get("top_k_limit"),
        metadata_filters=sent["metadata_filter"] if "metadata_filter" in sent else ...,
        expires_at=sent["expires_at"] if "expires_at" in sent else ...,
    )
    return KeyOut(**keys_svc.key_view(row))


def _status_route(action: str):  # noqa: ANN202
    fn = {"disable": keys_svc.do_disable_key, "enable": keys_svc.do_enable_key, "revoke": keys_svc.do_revoke_key}[
        action
    ]

    def route(
        key_id: uuid.UUID, session: SessionDep, principal: AdminDep, scope: AdminScopeDep, tenant_id: TenantQ = None
    ) -> StatusOut:
        tid = _tenant(scope, tenant_id)
        ch = fn(session, principal, tid, key_id)
        return StatusOut(id=ch.row.id, before=ch.before, status=ch.after)

    route.__name__ = f"{action}_key"
    route.__doc__ = {
        "disable": "Reversible; Dify gets 1002 from the next call.",
        "enable": "Re-enable a disabled key (revoked stays revoked).",
        "revoke": "Terminal; Dify gets 1002 from the next call.",
    }[action]
    return route


for _action in ("disable", "enable", "revoke"):
    admin.post(f"/keys/{{key_id}}/{_action}", response_model=StatusOut, responses=_ERR)(_status_route(_action))


@admin.post("/keys/{key_id}/rotate", response_model=KeyWithSecret, responses=_ERR)
def rotate_key(
    key_id: uuid.UUID, session: SessionDep, principal: AdminDep, scope: AdminScopeDep, tenant_id: TenantQ = None
) -> KeyWithSecret:
    """New secret, same scope; the old secret stops working when this request commits."""
    tid = _tenant(scope, tenant_id)
    row, plaintext = keys_svc.do_rotate_key(session, principal, tid, key_id)
    return KeyWithSecret(**keys_svc.key_view(row), key=plaintext)


@admin.get("/mappings", response_model=MappingList, responses=_ERR)
def list_mappings(session: SessionDep, scope: AdminScopeDep, tenant_id: TenantQ = None) -> MappingList:
    rows = map_svc.list_mappings(session, _tenant(scope, tenant_id))
    return MappingList(items=[MappingOut(**map_svc.mapping_view(r)) for r in rows])


@admin.post("/mappings", response_model=MappingResult, responses=_ERR)
def create_mapping(
    body: MappingIn, session: SessionDep, principal: AdminDep, scope: AdminScopeDep, tenant_id: TenantQ = None
) -> MappingResult:
    """Upsert: mapping a knowledge id again points it at the new knowledge base."""
    tid = _tenant(scope, tenant_id)
    res = map_svc.do_map(session, principal, tenant_id=tid, knowledge_id=body.knowledge_id, kb=body.knowledge_base_id)
    return MappingResult(**map_svc.mapping_view(res.row), created=res.created)


def _mapping_status_route(action: str):  # noqa: ANN202
    fn = map_svc.do_disable_mapping if action == "disable" else map_svc.do_enable_mapping

    def route(
        mapping_id: str, session: SessionDep, principal: AdminDep, scope: AdminScopeDep, tenant_id: TenantQ = None
    ) -> MappingOut:
        tid = _tenant(scope, tenant_id)
        row, _before = fn(session, principal, tid, mapping_id)
        return MappingOut(**map_svc.mapping_view(row))

    route.__name__ = f"{action}_mapping"
    route.__doc__ = "By mapping id or knowledge id."
    return route


for _action in ("disable", "enable"):
    admin.post(f"/mappings/{{mapping_id}}/{_action}", response_model=MappingOut, responses=_ERR)(
        _mapping_status_route(_action)
    )


@admin.get("/info", responses=_ERR)
def info(ctx: CtxDep, principal: AdminDep) -> dict[str, Any]:  # noqa: ARG001 - admin only
    """The endpoint URL to paste into Dify (Dify appends /retrieval itself) and the steps."""
    return svc.endpoint_info(ctx.settings)


router.include_router(admin)
