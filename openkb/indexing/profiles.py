"""Index profiles (``milvus_index_profiles``): which collection, which functions, which vector size.

A profile is instance-wide (``tenant_id`` NULL): one Milvus collection serves every tenant, and
only system_admin / tenant_admin may create, rebuild or switch one (docs/retrieval.md#principles — knowledge-base
owners never configure models). The row stores function *shapes* (provider, model, endpoint,
analyzer), never credentials: ``refuse_secrets`` runs on every input before anything is built,
so a key cannot reach PostgreSQL, a collection's function params or an audit row.

Statuses: ``building`` (created; its collection may be filling), ``ready`` (its rebuild
succeeded and passed the health check; ``index switch`` may activate it), ``active`` (the alias
points at it), ``deprecated`` (was active; kept for rollback until dropped), ``failed`` (its
last rebuild failed; a re-run resumes it), ``dropped`` (its collection was dropped; the row is
kept so ``index rebuild --profile`` can recreate it).

Also the one place that knows "which profile is active" cheaply: ``active_spec`` caches it per
process for a few seconds; retrieval and Dify read it from here (indexing never imports them).
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlmodel import Session, col, select

from openkb.audit import record_audit
from openkb.context import AppContext
from openkb.errors import AlreadyExists, NotFound, ValidationError
from openkb.indexing.milvus import (
    BM25_FUNCTION,
    EMBED_FUNCTION,
    RERANK_FUNCTION,
    SCHEMA_VERSION,
    alias_target,
    switch_alias,
)
from openkb.indexing.profiles_spec import (
    Backend,
    EmbeddingSpec,
    ProfileSpec,
    RerankSpec,
    collection_name_for,
    default_analyzer,
    default_lexical,
    refuse_secrets,
)
from openkb.models import MilvusIndexProfile
from openkb.permissions.principal import Principal

log = logging.getLogger("openkb.indexing.profiles")

DEFAULT_PROFILE_NAME = "default"
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")


_backend_cache: dict[str, Backend] = {}


# --- who may operate the index, and the audit of what they did ----------------------------------


def authorize_operator(session: Session, principal: Principal) -> None:
    """Index operations are for system_admin / tenant_admin (docs/permissions.md: knowledge-base
    owners never configure models). ``Principal.system()`` is the CLI operator and the worker."""
    if principal.kind == "system":
        return
    from openkb.accounts.users import access_admin

    access_admin(session, principal)


def audit_index(
    session: Session,
    principal: Principal | None,
    action: str,
    *,
    object_type: str = "milvus_index",
    object_id: uuid.UUID | None = None,
    **meta: Any,
) -> None:
    """One audit row per operation, written by the service in the operation's transaction (the
    CLI and REST adapters write none of their own; they declare the origin, ``openkb.audit.set_origin``)."""
    tenant = principal.tenant_id if principal is not None and principal.kind != "system" else None
    record_audit(
        session,
        tenant_id=tenant,
        actor=principal,
        action=action,
        object_type=object_type,
        object_id=object_id,
        metadata=meta,
    )


def backend_of(ctx: AppContext) -> Backend:
    """Lite or a 2.6 server: the analyzer (and rerank provider) choices differ. Asked of the
    server itself (``MILVUS_URI`` may point at a Lite server too), remembered per URI."""
    uri = ctx.endpoints.milvus_uri
    hit = _backend_cache.get(uri)
    if hit is not None:
        return hit
    try:
        version = str(ctx.milvus.get_server_version())
        backend: Backend = "lite" if "lite" in version.lower() else "server"
    except Exception:  # noqa: BLE001 - unknown: guess from the settings, don't cache the guess
        return "lite" if ctx.settings.embedded("milvus") else "server"
    _backend_cache[uri] = backend
    return backend


def current_target(client: Any, alias: str) -> str | None:
    """The collection ``alias`` points at, or None. Checks the alias list first: a missing
    alias makes ``describe_alias`` fail, and pymilvus logs a traceback for every such call."""
    try:
        listed = client.list_aliases()
    except Exception:  # noqa: BLE001
        listed = None
    names = listed.get("aliases", []) if isinstance(listed, Mapping) else None
    if names is not None and alias not in names:
        return None
    return alias_target(client, alias)


def point_alias(client: Any, alias: str, collection: str) -> str | None:
    """Create or move ``alias`` to ``collection``; returns the previous target."""
    if current_target(client, alias) is None:
        try:
            client.create_alias(collection, alias)
        except Exception as exc:
            from openkb.errors import IndexError_

            raise IndexError_(f"cannot create alias {alias} -> {collection}: {exc}") from exc
        log.info("alias %s created -> %s", alias, collection)
        return None
    return switch_alias(client, alias, collection)


def spec_of(profile: MilvusIndexProfile) -> ProfileSpec:
    return ProfileSpec.from_metadata(profile.function_metadata)


def get_profile(session: Session, ref: str | uuid.UUID) -> MilvusIndexProfile:
    """By id, name or collection name."""
    ref_s = str(ref)
    try:
        row = session.get(MilvusIndexProfile, uuid.UUID(ref_s))
        if row is not None:
            return row
    except ValueError:
        pass
    row = session.exec(
        select(MilvusIndexProfile).where(
            (MilvusIndexProfile.name == ref_s) | (MilvusIndexProfile.collection_name == ref_s)
        )
    ).first()
    if row is None:
        raise NotFound(f"no index profile {ref_s!r} (see `openkb profile list`)")
    return row


def find_by_collection(session: Session, collection: str | None) -> MilvusIndexProfile | None:
    if not collection:
        return None
    return session.exec(select(MilvusIndexProfile).where(MilvusIndexProfile.collection_name == collection)).first()


def list_profiles(session: Session) -> list[MilvusIndexProfile]:
    return list(session.exec(select(MilvusIndexProfile).order_by(col(MilvusIndexProfile.created_at))).all())


def active_profile(ctx: AppContext, session: Session) -> MilvusIndexProfile | None:
    """The profile of the collection the active alias points at (Milvus is asked: the alias is
    the truth of what searches hit), falling back to the row marked ``active``."""
    target = current_target(ctx.milvus, ctx.settings.milvus_active_alias)
    row = find_by_collection(session, target)
    if row is not None:
        return row
    return session.exec(
        select(MilvusIndexProfile)
        .where(MilvusIndexProfile.status == "active")
        .order_by(col(MilvusIndexProfile.activated_at).desc())
    ).first()


# --- the active profile, cached briefly ----------------------------------------------------------

PROFILE_TTL_S = 5.0
_active_cache: dict[int, tuple[float, str | None, ProfileSpec | None]] = {}
_active_lock = threading.Lock()


def active_spec(ctx: AppContext, session: Session) -> tuple[str | None, ProfileSpec | None]:
    """(collection, spec) of the active profile, cached ``PROFILE_TTL_S`` per process and context.

    Trap: after a switch made by *another* process this is stale for up to the TTL. That only
    shapes the request (functions, dense or not); searches go through the alias, which Milvus
    resolves on every call. "No profile yet" is never cached: on a fresh install the first index
    job (maybe in another process) creates the profile, and a cached absence made every search
    answer nothing for up to the TTL after that page was already reported ``indexed``."""
    key = id(ctx)
    now = time.monotonic()
    hit = _active_cache.get(key)
    if hit is not None and hit[0] > now:
        return hit[1], hit[2]
    prof = active_profile(ctx, session)
    if prof is None:
        return None, None
    value = (prof.collection_name, spec_of(prof))
    with _active_lock:
        _active_cache[key] = (now + PROFILE_TTL_S, *value)
    return value


def forget_active_profile() -> None:
    """Drop the cache (after a switch in this process, and in tests)."""
    with _active_lock:
        _active_cache.clear()


def _next_version(ctx: AppContext, session: Session, model_slug: str, dim: int) -> int:
    taken = {p.collection_name for p in list_profiles(session)}
    try:
        taken |= set(ctx.milvus.list_collections())
    except Exception:  # noqa: BLE001 - PostgreSQL's list is enough to stay unique among profiles
        pass
    n = 1
    while collection_name_for(model_slug, dim, n) in taken:
        n += 1
    return n


@dataclass(frozen=True)
class ProfileInput:
    """What an admin may say about a new profile (CLI flags / JSON body)."""

    name: str | None = None
    model: str | None = None  # None -> BM25-only
    dim: int = 0
    provider: str = "openai"
    endpoint: str | None = None  # the provider's base URL (Milvus calls it, OpenKB never does)
    params: Mapping[str, Any] | None = None  # further TEXTEMBEDDING params (never keys)
    rerank_provider: str | None = None
    rerank_endpoint: str | None = None
    rerank_model: str | None = None
    rerank_params: Mapping[str, Any] | None = None
    analyzer: Mapping[str, Any] | None = None  # default: jieba on Lite, chinese on 2.6
    backend: Backend | None = None


def input_like(
    session: Session, ref: str, name: str | None = None, *, also_given: Sequence[str] = (), option: str = "like"
) -> ProfileInput:
    """A new profile's input with the functions of the existing profile ``ref`` (its embedding,
    rerank, BM25 analyzer and backend): the way to move an install onto what a new profile gets
    and an old one keeps, such as the latest lexical transform (docs/retrieval.md#lexical-analysis),
    without restating the embedding service's address. NotFound for an unknown profile;
    ValidationError when function options were given beside it (``also_given``, as the caller
    names them; ``option``: how the caller names this one)."""
    if also_given:
        raise ValidationError(
            f"{option} copies the functions of {ref!r}; leave out {', '.join(also_given)} (or leave out {option})",
            field="like",
        )
    spec = spec_of(get_profile(session, ref))
    emb, rr = spec.embedding, spec.rerank
    return ProfileInput(
        name=name,
        model=emb.model_name if emb else None,
        dim=spec.vector_dim if emb else 0,
        provider=emb.provider if emb else "openai",
        endpoint=emb.base_url if emb else None,
        params=dict(emb.extra) if emb else None,
        rerank_provider=rr.provider if rr else None,
        rerank_endpoint=rr.endpoint if rr else None,
        rerank_model=rr.model_name if rr else None,
        rerank_params=dict(rr.extra) if rr else None,
        analyzer=dict(spec.bm25_analyzer),
        backend=spec.backend,
    )


def build_spec(ctx: AppContext, session: Session, inp: ProfileInput) -> ProfileSpec:
    """Validate ``inp`` (credentials refused first, before any other message) into a spec with the
    next free ``openkb_chunks_<model>_<dim>_v<n>`` collection name."""
    for field, value in (("analyzer", inp.analyzer), ("params", inp.params), ("rerank_params", inp.rerank_params)):
        # valid JSON that is not an object (``--analyzer '[1]'``) crashed in dict() below
        if value is not None and not isinstance(value, Mapping):
            raise ValidationError(f"{field} must be a JSON object ({{...}}), not {type(value).__name__}", field=field)
    refuse_secrets(
        {
            "params": dict(inp.params or {}),
            "rerank_params": dict(inp.rerank_params or {}),
            "analyzer": dict(inp.analyzer or {}),
            "endpoint": inp.endpoint or "",
            "rerank_endpoint": inp.rerank_endpoint or "",
            "model": inp.model or "",
            "name": inp.name or "",
        },
        where="profile",
    )
    for url in (inp.endpoint, inp.rerank_endpoint):
        if url and re.search(r"//[^/@]+:[^/@]*@", url):
            raise ValidationError(
                "endpoint URLs must not embed credentials (user:password@); configure them in "
                "Milvus or the provider deployment",
                field="endpoint",
            )
    backend = inp.backend or backend_of(ctx)
    dim = int(inp.dim or 0)
    if not inp.model and inp.params:
        raise ValidationError("--param configures the TEXTEMBEDDING function: give --model too", field="params")
    if inp.model and dim <= 0:
        raise ValidationError("an embedding profile needs --dim (the model's vector size)", field="dim")
    if not inp.model and dim:
        raise ValidationError("--dim without --model: a BM25-only profile has no vectors", field="dim")
    if inp.model and backend == "lite" and inp.provider != "openai":
        raise ValidationError(
            "Milvus Lite supports only the 'openai' TEXTEMBEDDING provider (any OpenAI-compatible "
            "/v1/embeddings endpoint); use a Milvus 2.6 server for other providers",
            field="provider",
        )
    embedding = None
    if inp.model:
        embedding = EmbeddingSpec(
            provider=inp.provider,
            model_name=inp.model,
            base_url=inp.endpoint,
            dimensions=dim,
            extra=dict(inp.params or {}),
        )
    rerank = None
    if inp.rerank_provider or inp.rerank_endpoint:
        if not (inp.rerank_provider and inp.rerank_endpoint):
            raise ValidationError("a rerank function needs both a provider and an endpoint", field="rerank")
        if backend == "lite" and inp.rerank_provider != "cohere":
            raise ValidationError(
                "Milvus Lite supports only the 'cohere' rerank provider (with its endpoint)", field="rerank_provider"
            )
        rerank = RerankSpec(
            provider=inp.rerank_provider,
            endpoint=inp.rerank_endpoint,
            model_name=inp.rerank_model,
            extra=dict(inp.rerank_params or {}),
        )
    slug = inp.model or "bm25"
    collection = collection_name_for(
        slug, dim if embedding else 0, _next_version(ctx, session, slug, dim if embedding else 0)
    )
    name = inp.name or collection
    if not _NAME_RE.match(name):
        raise ValidationError("profile names are 1-63 characters of a-z, 0-9, '_', '.', '-'", field="name")
    return ProfileSpec(
        name=name,
        collection_name=collection,
        vector_dim=dim if embedding else 0,
        embedding=embedding,
        bm25_analyzer=dict(inp.analyzer) if inp.analyzer else default_analyzer(backend),
        rerank=rerank,
        backend=backend,
        lexical=default_lexical(backend),
    )


def insert_profile(
    session: Session, spec: ProfileSpec, *, created_by: uuid.UUID | None = None, status: str = "building"
) -> MilvusIndexProfile:
    if session.exec(select(MilvusIndexProfile).where(MilvusIndexProfile.name == spec.name)).first() is not None:
        raise AlreadyExists(f"an index profile named {spec.name!r} exists")
    row = MilvusIndexProfile(
        tenant_id=None,
        name=spec.name,
        alias="",
        collection_name=spec.collection_name,
        schema_version=SCHEMA_VERSION,
        vector_dim=spec.vector_dim,
        embedding_function_name=EMBED_FUNCTION if spec.embedding else "",
        bm25_function_name=BM25_FUNCTION,
        rerank_function_name=RERANK_FUNCTION if spec.rerank else None,
        status=status,
        function_metadata=spec.to_metadata(),
        created_by=created_by,
    )
    session.add(row)
    session.flush()
    return row


def create_profile(ctx: AppContext, session: Session, principal: Principal, inp: ProfileInput) -> MilvusIndexProfile:
    """Record a new profile (audited). Its collection is created by the rebuild that fills it."""
    authorize_operator(session, principal)
    spec = build_spec(ctx, session, inp)
    row = insert_profile(session, spec, created_by=principal.user_id)
    audit_index(
        session,
        principal,
        "milvus.profile.create",
        object_type="milvus_index_profile",
        object_id=row.id,
        name=row.name,
        collection=row.collection_name,
    )
    return row


def mark_active(session: Session, profile: MilvusIndexProfile, alias: str) -> None:
    """PostgreSQL's record of an alias switch: the target active, every other active deprecated."""
    now = datetime.now(UTC)
    for other in session.exec(
        select(MilvusIndexProfile).where(MilvusIndexProfile.status == "active", MilvusIndexProfile.id != profile.id)
    ).all():
        other.status = "deprecated"
        other.alias = ""
        meta = dict(other.function_metadata)
        meta["deactivated_at_ms"] = int(time.time() * 1000)
        other.function_metadata = meta
        session.add(other)
    profile.status = "active"
    profile.alias = alias
    profile.activated_at = now
    meta = dict(profile.function_metadata)
    meta.pop("dropped_at", None)
    profile.function_metadata = meta
    session.add(profile)
    session.flush()


def describe(profile: MilvusIndexProfile, *, active_collection: str | None = None) -> dict[str, Any]:
    """The admin view (docs/retrieval.md#administration): names and shapes only; there is no key to show."""
    meta = profile.function_metadata or {}
    emb = meta.get("embedding") or None
    rr = meta.get("rerank") or None
    return {
        "id": str(profile.id),
        "name": profile.name,
        "status": profile.status,
        "collection": profile.collection_name,
        "active": profile.collection_name == active_collection,
        "schema_version": profile.schema_version,
        "vector_dim": profile.vector_dim,
        "backend": meta.get("backend"),
        "functions": {
            "embedding": None
            if not emb
            else {
                "name": profile.embedding_function_name,
                "type": "TEXTEMBEDDING",
                "provider": emb.get("provider"),
                "model": emb.get("model_name"),
                "endpoint": emb.get("base_url"),
                "dimensions": emb.get("dimensions"),
            },
            "bm25": {
                "name": profile.bm25_function_name,
                "type": "BM25",
                "analyzer": meta.get("bm25_analyzer"),
                "lexical": meta.get("lexical"),
            },  # docs/retrieval.md#lexical-analysis
            "rerank": None
            if not rr
            else {
                "name": profile.rerank_function_name,
                "type": "RERANK",
                "provider": rr.get("provider"),
                "endpoint": rr.get("endpoint"),
                "model": rr.get("model_name"),
            },
        },
        "created_at": profile.created_at.isoformat() if profile.created_at else None,
        "activated_at": profile.activated_at.isoformat() if profile.activated_at else None,
        "dropped_at": meta.get("dropped_at"),
    }
