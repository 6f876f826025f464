"""/api/admin/milvus/* (docs/08 §2): index status, profiles, rebuild jobs, alias switch.

system_admin / tenant_admin only (a PAT also needs the ``admin`` scope); knowledge-base owners
never touch models (docs/18 §3). Nothing here accepts or returns a provider key: a request body
carrying a key-like field is refused with ``VALIDATION_ERROR`` before anything else happens.
Rebuilds run in the worker (``index_rebuild`` job); poll ``GET .../rebuild-jobs/{id}``.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Body, Request, status
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from openkb.audit import record_audit
from openkb.errors import ValidationError
from openkb.indexing.profiles import ProfileInput, create_profile, current_target, describe, list_profiles
from openkb.indexing.profiles_spec import refuse_secrets
from openkb.indexing.rebuild import get_job, list_jobs, rollback, start_rebuild, switch
from openkb.indexing.service import index_status, rebuild_view
from openkb.jobs import enqueue_after_commit
from server.auth import AdminDep, client_ip
from server.deps import CtxDep, SessionDep
from server.errors import error_responses

router = APIRouter(prefix="/api/admin/milvus", tags=["admin: milvus"])
_ERR = error_responses(401, 403, 404, 409, 422)


class RerankIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    provider: str
    endpoint: str
    model: str | None = None
    params: dict[str, Any] | None = None


class ProfileIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, description="default: the collection name")
    model: str | None = Field(None, description="embedding model; omit for BM25-only")
    dim: int = Field(0, ge=0, le=65536)
    provider: str = "openai"
    endpoint: str | None = Field(None, description="provider base URL that Milvus calls")
    params: dict[str, Any] | None = Field(None, description="extra TEXTEMBEDDING params (never keys)")
    rerank: RerankIn | None = None
    analyzer: dict[str, Any] | None = Field(None, description="BM25 analyzer params")


class RebuildIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    profile: str = Field(description="profile name, id or collection")
    switch: bool = Field(False, description="switch the active alias when the rebuild is healthy")


class SwitchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    profile: str | None = Field(None, description="profile to activate; omit with rollback=true")
    rollback: bool = Field(False, description="return to the previously active collection")
    force: bool = False


def _audit(request: Request, session: Any, principal: Any, action: str, **meta: Any) -> None:
    record_audit(session, tenant_id=principal.tenant_id, actor=principal, action=action,
                 object_type="milvus_index", object_id=None, metadata=meta, ip=client_ip(request))


@router.get("/status", responses=_ERR)
def get_status(ctx: CtxDep, session: SessionDep, principal: AdminDep) -> dict[str, Any]:
    return index_status(ctx, session)


@router.get("/index-profiles", responses=_ERR)
def get_profiles(ctx: CtxDep, session: SessionDep, principal: AdminDep) -> dict[str, Any]:
    active = current_target(ctx.milvus, ctx.settings.milvus_active_alias)
    return {"items": [describe(p, active_collection=active) for p in list_profiles(session)]}


@router.post("/index-profiles", status_code=status.HTTP_201_CREATED, responses=_ERR)
def post_profile(request: Request, ctx: CtxDep, session: SessionDep, principal: AdminDep,
                 body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    # Credentials first, with the clear message, before schema validation names the field "extra".
    refuse_secrets(body, where="body")
    try:
        inp = ProfileIn.model_validate(body)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise ValidationError(f"{loc}: {first.get('msg', 'invalid')}", field=loc) from None
    rr = inp.rerank
    prof = create_profile(ctx, session, ProfileInput(
        name=inp.name, model=inp.model, dim=inp.dim, provider=inp.provider, endpoint=inp.endpoint, params=inp.params,
        rerank_provider=rr.provider if rr else None, rerank_endpoint=rr.endpoint if rr else None,
        rerank_model=rr.model if rr else None, rerank_params=rr.params if rr else None, analyzer=inp.analyzer),
        created_by=principal.user_id)
    _audit(request, session, principal, "milvus.profile.create", name=prof.name, collection=prof.collection_name)
    return describe(prof)


@router.post("/rebuild-jobs", status_code=status.HTTP_202_ACCEPTED, responses=_ERR)
def post_rebuild(request: Request, body: RebuildIn, ctx: CtxDep, session: SessionDep,
                 principal: AdminDep) -> dict[str, Any]:
    job = start_rebuild(ctx, session, body.profile, switch=body.switch, started_by=principal.user_id)
    enqueue_after_commit(session, "index_rebuild", job_id=str(job.id))
    _audit(request, session, principal, "milvus.rebuild.start", job_id=str(job.id), collection=job.target_collection,
           switch=body.switch)
    return rebuild_view(job)


@router.get("/rebuild-jobs", responses=_ERR)
def get_rebuilds(session: SessionDep, principal: AdminDep) -> dict[str, Any]:
    return {"items": [rebuild_view(j) for j in list_jobs(session)]}


@router.get("/rebuild-jobs/{job_id}", responses=_ERR)
def get_rebuild(job_id: uuid.UUID, session: SessionDep, principal: AdminDep) -> dict[str, Any]:
    return rebuild_view(get_job(session, job_id))


@router.post("/aliases/switch", responses=_ERR)
def post_switch(request: Request, body: SwitchIn, ctx: CtxDep, session: SessionDep,
                principal: AdminDep) -> dict[str, Any]:
    if body.rollback:
        out = rollback(ctx, session, body.profile)
        action = "milvus.alias.rollback"
    else:
        if not body.profile:
            raise ValidationError("profile is required (or rollback: true)", field="profile")
        out = switch(ctx, session, body.profile, force=body.force)
        action = "milvus.alias.switch"
    _audit(request, session, principal, action, **{k: v for k, v in out.items() if k != "caught_up"})
    return out
