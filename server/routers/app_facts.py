"""/api/apps/v1: facts, entities and the predicate vocabulary (docs/facts.md). Thin adapter over
``openkb.facts``, next to ``server/routers/apps.py`` (same prefix, same app credential).

* the **app** (``Authorization: Bearer kbapp_...``): ``POST /api/apps/v1/knowledge/<method>``
  for ``profile.get``, ``facts.lookup|put|retract``, ``entities.resolve|get|list|addIdentifier``;
* the **user** (session, or a token with the ``facts:read`` scope — never a default): their own
  facts (``/facts``), entities (``/entities``, merge, delete) and the vocabulary (``/predicates``).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from openkb.errors import (
    AppQuotaExceeded,
    KnowledgePermissionMissing,
    MetadataTooLarge,
    NameTooLong,
)
from openkb.facts import entities as E
from openkb.facts import service as F
from openkb.facts import vocabulary as V
from server.auth import UserDep, check_any_scope, check_scopes
from server.deps import CtxDep, SessionDep
from server.errors import errors_for
from server.routers.apps import CallerDep
from server.schemas import RequestModel

router = APIRouter(tags=["apps"])
P = "/api/apps/v1"
K = f"{P}/knowledge"
FACT_WRITE_ERRORS = (KnowledgePermissionMissing, AppQuotaExceeded, MetadataTooLarge)


# --- the app's methods ---------------------------------------------------------------------------


class KnowledgeProfileIn(RequestModel):
    prefix: str | None = Field(None, max_length=200, examples=["location.home"])


class KnowledgeProfileItem(BaseModel):
    predicate: str
    value: Any = None


class KnowledgeProfileOut(BaseModel):
    items: list[KnowledgeProfileItem]


@router.post(f"{K}/profile.get", response_model=KnowledgeProfileOut, responses=errors_for(401, 422))
def profile_get(session: SessionDep, caller: CallerDep, body: KnowledgeProfileIn | None = None) -> dict[str, Any]:
    """The user's pinned facts about themselves that the app's ``facts.read:self:...`` cover
    (a query method: the rest is left out)."""
    return {"items": F.profile_get(session, caller, body.prefix if body else None)}


class LookupIn(RequestModel):
    subject: str = Field("self", max_length=100, description="'self' or an entity ref")
    prefix: str | None = Field(None, max_length=200, examples=["pref.food"])


class FactItem(BaseModel):
    ref: str
    predicate: str
    value: Any = None
    object: str | None = None
    validFrom: datetime  # noqa: N815


class FactList(BaseModel):
    items: list[FactItem]


@router.post(f"{K}/facts.lookup", response_model=FactList, responses=errors_for(401, 404, 422))
def facts_lookup(body: LookupIn, session: SessionDep, caller: CallerDep) -> dict[str, Any]:
    """Current facts of the subject (never inferred ones, no origin, writer or confidence)."""
    return {"items": F.lookup(session, caller, body.subject, body.prefix)}


class PutIn(RequestModel):
    subject: str = Field("self", max_length=100)
    predicateHint: str = Field(min_length=1, max_length=500, examples=["pref.food.rated"])  # noqa: N815
    description: str | None = Field(None, max_length=200)
    value: Any = None
    object: str | None = Field(None, max_length=100, description="an entity ref the value points at")
    sourceRef: str | None = Field(None, max_length=1000)  # noqa: N815
    runId: str | None = Field(None, max_length=200)  # noqa: N815
    origin: str | None = Field(None, max_length=200, description="needs origin.override")
    source: str | None = Field(None, max_length=200, description="needs origin.override")
    confidence: float | None = Field(None, ge=0, le=1)


class PutOut(BaseModel):
    status: Literal["applied", "duplicate", "conflict"]
    ref: str
    predicate: str


@router.post(f"{K}/facts.put", response_model=PutOut, responses=errors_for(401, 404, 422, *FACT_WRITE_ERRORS))
def facts_put(body: PutIn, session: SessionDep, caller: CallerDep, ctx: CtxDep) -> dict[str, Any]:
    """The hint is resolved (full predicate, alias, description, ``x.``) before ``facts.write``
    is checked on the result."""
    return F.put(
        session, caller, subject=body.subject, predicate_hint=body.predicateHint, description=body.description,
        value=body.value, object_ref=body.object, source_ref=body.sourceRef, run_id=body.runId, origin=body.origin,
        source=body.source, confidence=body.confidence, settings=ctx.settings,
    )  # fmt: skip


class RetractIn(RequestModel):
    ref: str = Field(max_length=100)
    runId: str | None = Field(None, max_length=200)  # noqa: N815


class RetractOut(BaseModel):
    status: Literal["retracted", "already_retracted"]


@router.post(f"{K}/facts.retract", response_model=RetractOut, responses=errors_for(401, 404, *FACT_WRITE_ERRORS))
def facts_retract(body: RetractIn, session: SessionDep, caller: CallerDep, ctx: CtxDep) -> dict[str, Any]:
    """Expire (never delete); another writer's fact needs ``changes.manage``."""
    return F.retract(session, caller, body.ref, run_id=body.runId, settings=ctx.settings)


class IdentifiersIn(RequestModel):
    email: str | None = Field(None, max_length=1000)
    phone: str | None = Field(None, max_length=1000)
    domain: str | None = Field(None, max_length=1000)
    url: str | None = Field(None, max_length=1000)
    handle: str | None = Field(None, max_length=1000, description="platform:account, e.g. github:zhangsan")
    name: str | None = Field(None, max_length=1000)


class ResolveIn(RequestModel):
    by: IdentifiersIn
    kind: str = Field("person", max_length=40)
    create: bool = False
    displayName: str | None = Field(None, max_length=1000)  # noqa: N815


class EntityOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    ref: str
    kind: str
    displayName: str  # noqa: N815


class MaybeEntityOut(BaseModel):
    entity: EntityOut | None


@router.post(
    f"{K}/entities.resolve",
    response_model=MaybeEntityOut,
    responses=errors_for(401, 409, 422, KnowledgePermissionMissing, AppQuotaExceeded, NameTooLong),
)
def entities_resolve(body: ResolveIn, session: SessionDep, caller: CallerDep) -> dict[str, Any]:
    """A point lookup by identifier (``{"entity": null}`` when none); ``create`` needs
    ``entities.write:<kind>``."""
    ids = body.by.model_dump(exclude_none=True)
    return {
        "entity": E.resolve(session, caller, ids, kind=body.kind, create=body.create, display_name=body.displayName)
    }


class RefIn(RequestModel):
    ref: str = Field(max_length=100)


@router.post(f"{K}/entities.get", response_model=EntityOut, responses=errors_for(401, 404, KnowledgePermissionMissing))
def entities_get(body: RefIn, session: SessionDep, caller: CallerDep) -> dict[str, Any]:
    """A merged entity's old ref answers the survivor; a deleted one is 404 ``no entity``."""
    return E.get(session, caller, body.ref)


class EntityListIn(RequestModel):
    kind: str = Field("person", max_length=40)
    query: str | None = Field(None, max_length=1000)
    limit: int = Field(200, ge=1, le=1000)


class EntityList(BaseModel):
    items: list[EntityOut]


@router.post(
    f"{K}/entities.list", response_model=EntityList, responses=errors_for(401, 422, KnowledgePermissionMissing)
)
def entities_list(body: EntityListIn, session: SessionDep, caller: CallerDep) -> dict[str, Any]:
    return {"items": E.list_entities(session, caller, body.kind, query=body.query, limit=body.limit)}


class AddIdentifierIn(RequestModel):
    ref: str = Field(max_length=100)
    kind: Literal["email", "phone", "domain", "url", "handle", "name"]
    value: str = Field(min_length=1, max_length=1000)


class AddIdentifierOut(BaseModel):
    status: Literal["added", "exists"]


@router.post(
    f"{K}/entities.addIdentifier",
    response_model=AddIdentifierOut,
    responses=errors_for(401, 404, 409, 422, KnowledgePermissionMissing, AppQuotaExceeded),
)
def entities_add_identifier(body: AddIdentifierIn, session: SessionDep, caller: CallerDep) -> dict[str, Any]:
    return E.add_identifier(session, caller, body.ref, body.kind, body.value)


# --- the user's own facts and entities ---------------------------------------------------------------


def _reader(principal: UserDep) -> Any:
    check_scopes(principal, "facts:read")
    return principal


def _writer(principal: UserDep) -> Any:
    check_scopes(principal, "facts:read")
    check_any_scope(principal, "kb:write", "doc:write")
    return principal


ReaderDep = Annotated[Any, Depends(_reader)]
WriterDep = Annotated[Any, Depends(_writer)]


class PredicateOut(BaseModel):
    predicate: str
    cardinality: Literal["one", "many"]
    names: dict[str, str]
    description: str
    aliases: list[str]
    origin: str


class PredicateList(BaseModel):
    items: list[PredicateOut]


@router.get(f"{P}/predicates", response_model=PredicateList, responses=errors_for(401, 403))
def list_predicates(session: SessionDep, principal: ReaderDep) -> dict[str, Any]:
    """The tenant's vocabulary: core predicates (with names) and those apps declared."""
    return {"items": [V.pred_out(p) for p in V.all_predicates(session, principal.tenant_id)]}


class UserFactOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: uuid.UUID
    predicate: str
    value: Any = None
    object_id: uuid.UUID | None
    valid_from: datetime
    valid_to: datetime | None
    said_by: Literal["user", "app"]
    app: str | None


class UserFactList(BaseModel):
    items: list[UserFactOut]


@router.get(f"{P}/facts", response_model=UserFactList, responses=errors_for(401, 403, 404, 422))
def my_facts(
    session: SessionDep,
    principal: ReaderDep,
    subject_id: uuid.UUID | None = None,
    prefix: str | None = None,
    history: bool = False,
) -> dict[str, Any]:
    """Facts about you (or one of your entities), with who said them; ``history``: expired too."""
    return {"items": F.user_facts(session, principal, subject_id=subject_id, prefix=prefix, history=history)}


class UserFactIn(RequestModel):
    predicate: str = Field(min_length=3, max_length=200)
    value: Any = None
    subject_id: uuid.UUID | None = None
    object_id: uuid.UUID | None = None
    pinned: bool | None = None


class UserPutOut(BaseModel):
    status: Literal["applied", "duplicate"]
    id: uuid.UUID
    predicate: str


@router.post(f"{P}/facts", response_model=UserPutOut, responses=errors_for(401, 403, 404, 422, MetadataTooLarge))
def put_my_fact(body: UserFactIn, session: SessionDep, principal: WriterDep) -> dict[str, Any]:
    """A value you say: apps cannot overwrite it on a cardinality-``one`` predicate."""
    return F.user_put(
        session, principal, predicate=body.predicate, value=body.value, subject_id=body.subject_id,
        object_id=body.object_id, pinned=body.pinned,
    )  # fmt: skip


@router.post(f"{P}/facts/{{fact_id}}/retract", response_model=RetractOut, responses=errors_for(401, 403, 404))
def retract_my_fact(fact_id: uuid.UUID, session: SessionDep, principal: WriterDep) -> dict[str, Any]:
    return F.user_retract(session, principal, fact_id)


class UserEntityOut(BaseModel):
    id: uuid.UUID
    kind: str
    display_name: str
    identifiers: list[dict[str, str]]


class UserEntityList(BaseModel):
    items: list[UserEntityOut]


def _entity(session: Any, ent: Any) -> dict[str, Any]:
    return {
        "id": ent.id,
        "kind": ent.kind,
        "display_name": ent.display_name,
        "identifiers": [{"kind": i["kind"], "value": i["value"]} for i in E.identifiers_of(session, ent.id)],
    }


@router.get(f"{P}/entities", response_model=UserEntityList, responses=errors_for(401, 403))
def my_entities(
    session: SessionDep, principal: ReaderDep, kind: str | None = None, query: str | None = None, limit: int = 200
) -> dict[str, Any]:
    rows = E.list_for_user(session, principal.tenant_id, principal.user_id, kind, query=query, limit=limit)
    return {"items": [_entity(session, e) for e in rows]}


class EntityIn(RequestModel):
    kind: str = Field("person", max_length=40)
    display_name: str = Field(min_length=1, max_length=1000)
    identifiers: IdentifiersIn | None = None


@router.post(f"{P}/entities", status_code=201, response_model=UserEntityOut, responses=errors_for(401, 403, 409, 422))
def create_my_entity(body: EntityIn, session: SessionDep, principal: WriterDep) -> dict[str, Any]:
    ids = body.identifiers.model_dump(exclude_none=True) if body.identifiers else {}
    ent = E.create_entity(session, principal, kind=body.kind, display_name=body.display_name, identifiers=ids)
    return _entity(session, ent)


class MergeIn(RequestModel):
    merged_id: uuid.UUID = Field(description="the entity folded into this one; its refs keep working")


@router.post(
    f"{P}/entities/{{entity_id}}/merge", response_model=UserEntityOut, responses=errors_for(401, 403, 404, 422)
)
def merge_my_entities(entity_id: uuid.UUID, body: MergeIn, session: SessionDep, principal: WriterDep) -> dict[str, Any]:
    return _entity(session, E.merge(session, principal, entity_id, body.merged_id))


@router.delete(f"{P}/entities/{{entity_id}}", status_code=204, responses=errors_for(401, 403, 404, 422))
def delete_my_entity(entity_id: uuid.UUID, session: SessionDep, principal: WriterDep) -> None:
    """Its facts expire; an app's ref to it then fails with ``no entity``."""
    E.delete(session, principal, entity_id)


class CoveredValue(BaseModel):
    id: uuid.UUID
    value: Any = None
    object_id: uuid.UUID | None
    said_by: Literal["user", "app"]
    valid_from: datetime


class CoveredPredicate(BaseModel):
    predicate: str
    cardinality: Literal["one", "many"]
    names: dict[str, str]
    description: str
    added_by_this_app: bool
    reads: bool
    writes: bool
    values: list[CoveredValue]


class CoveredList(BaseModel):
    items: list[CoveredPredicate]


@router.get(
    f"{P}/installations/{{installation_id}}/facts", response_model=CoveredList, responses=errors_for(401, 403, 404)
)
def installation_facts(installation_id: uuid.UUID, session: SessionDep, principal: ReaderDep) -> dict[str, Any]:
    """The facts about you an installed app's strings cover, with your current values."""
    return {"items": F.installation_facts(session, principal, installation_id)}
