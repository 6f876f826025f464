"""/api/admin/milvus/* (docs/retrieval.md#administration): index status, profiles, rebuild jobs, alias switch.

system_admin / tenant_admin only (a PAT also needs the ``admin`` scope); knowledge-base owners
never touch models (docs/retrieval.md#principles). The services authorize again and write the audit rows (the
request's IP reaches them through ``openkb.audit.set_origin``); routes parse, call, return.
Nothing here accepts or returns a provider key: a request body carrying a key-like field is refused with ``VALIDATION_ERROR`` before anything else happens.
Rebuilds run in the worker (``index_rebuild`` job); poll ``GET .../rebuild-jobs/{id}``.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Body, Query, status
from pydantic import ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from openkb.errors import AlreadyExists, IndexError_, RebuildBusy, ValidationError
from openkb.indexing.profiles import (
    ProfileInput,
    create_profile,
    current_target,
    describe,
    input_like,
    list_profiles,
)
from openkb.indexing.profiles_spec import refuse_secrets
from openkb.indexing.rebuild import (
    drop,
    get_job,
    history,
    list_jobs,
    rollback,
    start_rebuild,
    switch,
)
from openkb.indexing.service import index_status, rebuild_view
from openkb.jobs import enqueue_after_commit
from server.auth import AdminDep
from server.deps import CtxDep, SessionDep
from server.errors import error_responses, errors_for
from server.schemas import RequestModel

router = APIRouter(prefix="/api/admin/milvus", tags=["admin: milvus"])
_ERR = error_responses(401, 403, 404, 409, 422)


class RerankIn(RequestModel):
    model_config = ConfigDict(extra="forbid")
    provider: str
    endpoint: str
    model: str | None = None
    params: dict[str, Any] | None = None


class ProfileIn(RequestModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, description="default: the collection name")
    model: str | None = Field(None, description="embedding model; omit for BM25-only")
    dim: int = Field(0, ge=0, le=65536)
    provider: str = "openai"
    endpoint: str | None = Field(None, description="provider base URL that Milvus calls")
    params: dict[str, Any] | None = Field(None, description="extra TEXTEMBEDDING params (never keys)")
    rerank: RerankIn | None = None
    analyzer: dict[str, Any] | None = Field(None, description="BM25 analyzer params")
    like: str | None = Field(
        None,
        description="copy the functions (embedding, rerank, analyzer) of this profile (name, id or collection) "
        "instead of giving them: a new profile with what new profiles get, such as the latest lexical transform",
    )


class RebuildIn(RequestModel):
    model_config = ConfigDict(extra="forbid")
    profile: str = Field(description="profile name, id or collection")
    switch: bool = Field(False, description="switch the active alias when the rebuild is healthy")


class SwitchIn(RequestModel):
    model_config = ConfigDict(extra="forbid")
    profile: str | None = Field(None, description="profile to activate; omit with rollback=true")
    rollback: bool = Field(False, description="return to the previously active collection")
    force: bool = False


@router.get("/status", responses=_ERR)
def get_status(ctx: CtxDep, session: SessionDep, principal: AdminDep) -> dict[str, Any]:
    return index_status(ctx, session)


@router.get("/index-profiles", responses=_ERR)
def get_profiles(ctx: CtxDep, session: SessionDep, principal: AdminDep) -> dict[str, Any]:
    active = current_target(ctx.milvus, ctx.settings.milvus_active_alias)
    return {"items": [describe(p, active_collection=active) for p in list_profiles(session)]}


@router.post("/index-profiles", status_code=status.HTTP_201_CREATED, responses=errors_for(_ERR, AlreadyExists))
def post_profile(
    ctx: CtxDep, session: SessionDep, principal: AdminDep, body: dict[str, Any] = Body(...)
) -> dict[str, Any]:
    # Credentials first, with the clear message, before schema validation names the field "extra".
    refuse_secrets(body, where="body")
    try:
        inp = ProfileIn.model_validate(body)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise ValidationError(f"{loc}: {first.get('msg', 'invalid')}", field=loc) from None
    if inp.like is not None:
        given = sorted(inp.model_fields_set & {"model", "dim", "provider", "endpoint", "params", "rerank", "analyzer"})
        return describe(
            create_profile(ctx, session, principal, input_like(session, inp.like, inp.name, also_given=given))
        )
    rr = inp.rerank
    prof = create_profile(
        ctx,
        session,
        principal,
        ProfileInput(
            name=inp.name,
            model=inp.model,
            dim=inp.dim,
            provider=inp.provider,
            endpoint=inp.endpoint,
            params=inp.params,
            rerank_provider=rr.provider if rr else None,
            rerank_endpoint=rr.endpoint if rr else None,
            rerank_model=rr.model if rr else None,
            rerank_params=rr.params if rr else None,
            analyzer=inp.analyzer,
        ),
    )
    return describe(prof)


@router.post("/rebuild-jobs", status_code=status.HTTP_202_ACCEPTED, responses=errors_for(_ERR, RebuildBusy))
def post_rebuild(body: RebuildIn, ctx: CtxDep, session: SessionDep, principal: AdminDep) -> dict[str, Any]:
    job = start_rebuild(ctx, session, principal, body.profile, switch=body.switch)
    enqueue_after_commit(session, "index_rebuild", job_id=str(job.id))
    return rebuild_view(job)


@router.get("/rebuild-jobs", responses=_ERR)
def get_rebuilds(session: SessionDep, principal: AdminDep) -> dict[str, Any]:
    return {"items": [rebuild_view(j) for j in list_jobs(session)]}


@router.get("/rebuild-jobs/{job_id}", responses=_ERR)
def get_rebuild(job_id: uuid.UUID, session: SessionDep, principal: AdminDep) -> dict[str, Any]:
    return rebuild_view(get_job(session, job_id))


@router.post("/aliases/switch", responses=errors_for(_ERR, IndexError_))
def post_switch(body: SwitchIn, ctx: CtxDep, session: SessionDep, principal: AdminDep) -> dict[str, Any]:
    """``rollback: true`` returns to the collection active before the last switch not yet undone
    (a second rollback goes one step further back; 409 CONFLICT when nothing is left)."""
    if body.rollback:
        return rollback(ctx, session, principal, body.profile)
    if not body.profile:
        raise ValidationError("profile is required (or rollback: true)", field="profile")
    return switch(ctx, session, principal, body.profile, force=body.force)


@router.get("/aliases/history", responses=_ERR)
def get_history(
    ctx: CtxDep, session: SessionDep, principal: AdminDep, limit: int = Query(50, ge=1, le=1000)
) -> dict[str, Any]:
    """Every move of the active alias, newest first, and where a rollback would go now."""
    return history(ctx, session, principal, limit=limit)


@router.delete("/index-profiles/{profile}/collection", responses=errors_for(_ERR, RebuildBusy))
def delete_collection(
    profile: str,
    ctx: CtxDep,
    session: SessionDep,
    principal: AdminDep,
    force: bool = Query(False, description="also drop the rollback target"),
) -> dict[str, Any]:
    """Drop a profile's collection (the profile stays, status ``dropped``); 409 for the active
    collection, and for the rollback target unless ``force``."""
    return drop(ctx, session, principal, profile, force=force)
