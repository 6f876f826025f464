"""Dify-key-bound retrieval (docs/dify.md): who is calling and what it may read
(``identify`` + ``authorize``), then the search with Dify's metadata conditions (``retrieve``).

Dify's wire format (the ``Authorization`` header, the JSON body, ``{"error_code", "error_msg"}``
and its statuses) is the server's business (``server/dify_wire.py``); this module takes a parsed
token and a ``RetrievalQuery`` and raises domain errors with stable codes:

====================================  =====================================================
raised                                when
====================================  =====================================================
``DifyKeyRejected``                   unknown, disabled, revoked or expired key; a key whose
                                      stored metadata filter is unreadable; or the mapped
                                      knowledge base is not in the key's allow-list
``RateLimited`` (``retry_after``)     this key's requests per minute are exhausted
``DifyKnowledgeNotFound``             knowledge_id not mapped (or mapping disabled, or in
                                      another tenant)
``ServiceUnavailable``/``IndexError_``  the search backend is down (from ``retrieve``)
====================================  =====================================================

Flow of one call (the adapter owns the two units of work)::

    identify: ONE query, key by hash + mapping of (key's tenant, knowledge_id)
    authorize: key status, rate limit per key (fixed window in PostgreSQL), last_used_at (at
        most once a minute), the key's own metadata filter; knowledge_id == "" (Dify's
        registration probe) -> an Authorized without a knowledge base; else mapping, allow-list
    -- commit (counter, last_used_at, failure audit): short, so hot keys don't queue on row locks
    retrieve: openkb.retrieval.search(principal = this key narrowed to that one knowledge base)
        (scope prefilter -> Milvus hybrid -> PostgreSQL final check: published, readable)
        metadata condition AND the key's allowed_metadata_filters (conditions.py), score_threshold
        (0.0/None = off), top_k (request's, capped by the key's limit; None -> the limit)
    audit_call: one audit row per identified call; commit

Metadata filtering DECISION: the condition language (every Dify operator, and/or, Unicode and
ASCII forms) is richer than the retrieval service's ``filters`` (tags any-of, metadata
equality, updated_at range), so it is evaluated here, exactly, in Python (``conditions.py``)
on each hit's document as the retrieval service read it from PostgreSQL for its final check
(metadata, tags, title, updated_at: no extra query; ``created_at`` costs one when a condition
names it). What the retrieval filters can express *soundly* is pushed down: a ``tags is|in``
condition of at most 50 tags AND-ed at the top becomes ``filters={"tags": [...]}``
(property-tested never to hide a match; a longer one is only evaluated here). Otherwise the search over-fetches ``OVERFETCH x top_k`` (capped at the
service's MAX_TOP_K, 100) and filters that. Trade-off, named: a condition matching a small
share of a large knowledge base can return fewer than top_k records. An exact fix needs the
retrieval service to accept a document-id restriction (it already resolves tags/metadata to
``document_id in [...]`` internally); until then this is the documented limit.

Scores: retrieval's scores are 0-1 in every profile (docs/retrieval.md#scores); passed unchanged.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlparse

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlmodel import Session, select

from openkb.dify import conditions as cond
from openkb.dify import keys as keys_svc
from openkb.errors import DifyKeyRejected, DifyKnowledgeNotFound, RateLimited, Unauthenticated
from openkb.models import DifyApiKey, DifyKnowledgeMapping
from openkb.permissions.principal import Principal

log = logging.getLogger("openkb.dify")

# Generous on purpose: Dify retries 429 three times, so a 429 must mean real overload of one
# key, not a cautious default. Overridable with OPENKB_DIFY_RATE_LIMIT_PER_MINUTE once Settings
# has that field (read with getattr so this module does not depend on it).
DEFAULT_RATE_LIMIT_PER_MINUTE = 1200
RATE_WINDOW_S = 60
# With a metadata condition that can't be pushed down exactly, fetch this many times top_k
# (at most the retrieval service's MAX_TOP_K) before filtering.
OVERFETCH = 5
# Keys Dify overwrites in a record's metadata; kept out of ours so nothing is silently replaced.
DIFY_RESERVED_META = ("score", "title", "dataset_id", "dataset_name")


@dataclass(frozen=True)
class RetrievalQuery:
    """One retrieval request, parsed: what ``retrieve`` needs, independent of Dify's JSON."""

    query: str = ""
    top_k: int | None = None  # None: the key's limit; always capped by it
    score_threshold: float | None = None  # 0.0 or None: disabled
    condition: cond.Group | None = None  # the request's metadata_condition


# --- phase 1: who is calling, for what -----------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """The key a token names and its tenant's mapping of the requested knowledge_id (if any).

    Once a call has a ``Caller`` it has a tenant, so every later failure can be audited."""

    key: DifyApiKey
    mapping: DifyKnowledgeMapping | None

    @property
    def knowledge_base_id(self) -> uuid.UUID | None:
        """The mapped knowledge base, when the mapping exists and is active."""
        m = self.mapping
        return m.knowledge_base_id if m is not None and m.status == "active" else None


@dataclass(frozen=True)
class Authorized:
    key: DifyApiKey
    knowledge_id: str
    knowledge_base_id: uuid.UUID | None  # None: the registration probe
    principal: Principal  # narrowed to knowledge_base_id
    key_condition: cond.Group | None
    top_k_limit: int


def _rate_limit(ctx_settings: Any) -> int:
    v = getattr(ctx_settings, "openkb_dify_rate_limit_per_minute", None)
    return int(v) if isinstance(v, int) and v > 0 else DEFAULT_RATE_LIMIT_PER_MINUTE


def identify(session: Session, token: str, knowledge_id: str) -> Caller:
    """The key by hash and, in the same round trip, its tenant's mapping of ``knowledge_id``.

    Raises ``DifyKeyRejected`` for a token that names no key: such a call has no tenant, so it
    is logged by the adapter, never audited (a row per stranger's request is an amplifier)."""
    from openkb.security import hash_token

    row = None
    if keys_svc.looks_like_key(token):
        row = session.exec(
            select(DifyApiKey, DifyKnowledgeMapping)  # type: ignore[call-overload]
            .outerjoin(
                DifyKnowledgeMapping,
                (DifyKnowledgeMapping.tenant_id == DifyApiKey.tenant_id)
                & (DifyKnowledgeMapping.dify_knowledge_id == knowledge_id),
            )
            .where(DifyApiKey.key_hash == hash_token(token))
        ).first()
    if row is None:
        hint = "" if keys_svc.looks_like_key(token) else " (OpenKB Dify keys start with okdify_)"
        raise DifyKeyRejected("authorization failed: invalid API key" + hint)
    return Caller(key=row[0], mapping=row[1])


def dify_principal(key: DifyApiKey, knowledge_base_id: uuid.UUID | None) -> Principal:
    """The key as a principal, narrowed to the one knowledge base this call is about.

    ``readable_scope`` and the final check intersect ``allowed_kb_ids`` with the key's row as
    re-read from PostgreSQL, so a revocation between phase 1 and the search still wins.
    """
    p = Principal.dify(key)
    return replace(p, allowed_kb_ids=frozenset({knowledge_base_id}) if knowledge_base_id else frozenset())


def authorize(
    session: Session, settings: Any, caller: Caller, knowledge_id: str, *, now: datetime | None = None
) -> Authorized:
    """May ``caller`` search ``knowledge_id`` now? Counts the call against the key's rate limit.

    ``knowledge_id == ""`` is Dify's registration probe: a live key gets an ``Authorized``
    without a knowledge base (the adapter answers no records). Trap: the adapter must commit
    this session even when this raises, or the rate-limit counter and last_used_at roll back.
    """
    from openkb import ratelimit

    key = caller.key
    status = keys_svc.effective_status(key, now)
    if status != "active":
        raise DifyKeyRejected(f"authorization failed: the API key is {status}")
    if not ratelimit.hit(session, f"dify:{key.id}", _rate_limit(settings), RATE_WINDOW_S):
        retry = max(1, RATE_WINDOW_S - int(time.time()) % RATE_WINDOW_S)
        raise RateLimited(f"rate limit exceeded for this API key; retry in {retry}s", retry_after=retry)
    keys_svc.touch_last_used(session, key, now)
    try:
        key_condition = cond.parse_condition(key.allowed_metadata_filters or None)
    except cond.ConditionError:
        # normalize_metadata_filters refuses these at write time; a hand-edited row fails closed.
        log.error("dify key %s has an unreadable allowed_metadata_filters; refusing", key.id)
        raise DifyKeyRejected("authorization failed: this key's metadata filter is invalid") from None
    if knowledge_id == "":
        return Authorized(key, "", None, _principal(key, None), key_condition, key.retrieval_top_k_limit)
    kb_id = caller.knowledge_base_id
    if kb_id is None:
        raise DifyKnowledgeNotFound(
            f"knowledge does not exist: {knowledge_id!r} is not mapped (openkb dify map --knowledge-id ... --kb ...)"
        )
    if kb_id not in set(key.allowed_knowledge_base_ids or ()):
        raise DifyKeyRejected(f"authorization failed: this API key may not read {knowledge_id!r}")
    return Authorized(key, knowledge_id, kb_id, _principal(key, kb_id), key_condition, key.retrieval_top_k_limit)


def _principal(key: DifyApiKey, kb_id: uuid.UUID | None) -> Principal:
    try:
        return dify_principal(key, kb_id)
    except Unauthenticated:  # expired in the microseconds since the status check
        raise DifyKeyRejected("authorization failed: the API key is expired") from None


# --- phase 2: retrieval --------------------------------------------------------------------------


@dataclass
class Outcome:
    records: list[dict[str, Any]] = field(default_factory=list)
    document_ids: list[str] = field(default_factory=list)
    top_k: int = 0
    fetched: int = 0
    pushed_tags: int = 0
    query_truncated: bool = False


_CREATED_SQL = text("SELECT d.id::text AS id, d.created_at FROM documents d WHERE d.id = ANY(:ids)").bindparams(
    bindparam("ids", type_=ARRAY(PG_UUID(as_uuid=False)))
)
_CREATED_NAMES = frozenset({"created_at", "upload_date"})


def _doc_fields(hit: Any, created: Mapping[str, Any]) -> cond.DocFields:
    """What a condition sees of a hit's document: the retrieval service's PostgreSQL read of its
    metadata, tags, title and updated_at (the final check's snapshot), plus created_at if asked."""
    doc_id = str(_attr(hit, "document_id"))
    builtins = {"title": _attr(hit, "title"), "updated_at": _attr(hit, "updated_at"), "document_id": doc_id}
    if doc_id in created:
        builtins["created_at"] = created[doc_id]
    return cond.DocFields(metadata=_attr(hit, "metadata") or {}, tags=list(_attr(hit, "tags") or ()), builtins=builtins)


def document_url(base_url: str, kb_id: Any, doc_id: Any) -> str:
    return f"{base_url.rstrip('/')}/app/kb/{quote(str(kb_id), safe='')}/docs/{quote(str(doc_id), safe='')}"


def _attr(r: Any, name: str, default: Any = None) -> Any:
    if isinstance(r, Mapping):
        return r.get(name, default)
    return getattr(r, name, default)


def _title(hit: Any) -> str:
    t = str(_attr(hit, "title") or "").strip()
    if t:
        return t
    hp = [h for h in (_attr(hit, "heading_path") or ()) if h and str(h).strip()]
    if hp:
        return str(hp[-1]).strip()
    path = str(_attr(hit, "path") or "").strip(" /")
    if path:
        return path.rsplit("/", 1)[-1].strip() or "Untitled"
    return "Untitled"


def _jsonable(v: Any) -> Any:
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_jsonable(x) for x in v]
    return v


# Retrieval scores are already in [0, 1] in every profile (docs/retrieval.md#scores: score-aware
# fusion, BM25 relative to the query's best match, rerank relevance clamped), so they reach Dify
# unchanged and its score_threshold (a 0-1 relevance slider) keeps its own meaning.
def score_scale(ctx: Any, session: Session) -> float:
    """Factor applied to retrieval scores for Dify: 1.0 (scores are 0-1 already)."""
    return 1.0


def dify_score(raw: Any, scale: float) -> float:
    s = float(raw or 0.0)
    if s != s:  # NaN
        return 0.0
    return min(1.0, max(0.0, s * scale)) if scale != 1.0 else s


def build_record(hit: Any, *, base_url: str, knowledge_id: str, score: float) -> dict[str, Any]:
    """One Dify record: content (str), score (float), title (non-empty), metadata (object).

    The document's own metadata first, then ours on top (so ``document_id``/``chunk_id`` can't
    be shadowed by a user key); keys Dify overwrites (score, title, dataset_*) are left out.
    """
    doc_id, kb_id = str(_attr(hit, "document_id")), str(_attr(hit, "knowledge_base_id"))
    own = _attr(hit, "metadata") or {}
    meta: dict[str, Any] = (
        {str(k): v for k, v in own.items() if k not in DIFY_RESERVED_META} if isinstance(own, Mapping) else {}
    )
    meta.update(
        {
            "document_id": doc_id,
            "chunk_id": str(_attr(hit, "chunk_id")),
            "knowledge_base_id": kb_id,
            "knowledge_id": knowledge_id,
            "path": str(_attr(hit, "path") or ""),
            "heading_path": [str(h) for h in (_attr(hit, "heading_path") or ())],
            "url": document_url(base_url, kb_id, doc_id),
            "tags": [str(t) for t in (_attr(hit, "tags") or ())],
        }
    )
    if _attr(hit, "updated_at"):
        meta["updated_at"] = _attr(hit, "updated_at")
    return {
        "content": str(_attr(hit, "content") or ""),
        "score": score,
        "title": _title(hit),
        "metadata": _jsonable(meta),
    }


def effective_top_k(requested: int | None, limit: int) -> int:
    return max(1, min(requested or limit, limit))


def retrieve(ctx: Any, session: Session, auth: Authorized, request: RetrievalQuery) -> Outcome:
    """Phase 2: ``openkb.retrieval.search`` (scope prefilter -> Milvus -> PostgreSQL final check),
    then the metadata condition, score threshold and top_k, in that order.

    The condition is exact here (conditions.py) on the documents as the final check read them.
    What the retrieval filters can express soundly is pushed down (``tags is|in``, AND-ed), and
    otherwise the search over-fetches ``OVERFETCH x top_k`` (at most the service's MAX_TOP_K)
    before filtering: a very selective condition on a large knowledge base may then return
    fewer than top_k records (the trade-off is documented in the module docstring).
    """
    from openkb.retrieval import search
    from openkb.retrieval.service import MAX_QUERY_CHARS as SEARCH_MAX_QUERY
    from openkb.retrieval.service import MAX_TOP_K

    top_k = min(effective_top_k(request.top_k, auth.top_k_limit), MAX_TOP_K)
    out = Outcome(top_k=top_k)
    query = request.query.strip()
    if auth.knowledge_base_id is None or not query:
        return out
    if len(query) > SEARCH_MAX_QUERY:
        # Dify shows errors to the end user mid-chat; the first 2000 characters still retrieve.
        query, out.query_truncated = query[:SEARCH_MAX_QUERY], True
    condition = cond.all_of(auth.key_condition, request.condition)
    filters: dict[str, Any] | None = None
    fetch = top_k
    if condition is not None:
        pushed = cond.pushdown_tags(condition)
        exact = False
        if pushed is not None:
            filters = {"tags": list(pushed[0])}
            out.pushed_tags, exact = len(pushed[0]), pushed[1]
        if not exact:
            fetch = min(max(top_k * OVERFETCH, top_k), MAX_TOP_K)
    hits = search(
        ctx, session, auth.principal, query, knowledge_base_ids=[auth.knowledge_base_id], top_k=fetch, filters=filters
    )
    out.fetched = len(hits)
    # the principal and knowledge_base_ids already restrict this; cheap insurance all the same
    hits = [h for h in hits if str(_attr(h, "knowledge_base_id")) == str(auth.knowledge_base_id)]
    if condition is not None:
        created: dict[str, Any] = {}
        if cond.condition_names(condition) & _CREATED_NAMES and hits:
            ids = list(dict.fromkeys(str(_attr(h, "document_id")) for h in hits))
            created = {r["id"]: r["created_at"] for r in session.execute(_CREATED_SQL, {"ids": ids}).mappings()}
        hits = [h for h in hits if cond.evaluate(condition, _doc_fields(h, created))]
    scale = score_scale(ctx, session)
    scored = [(dify_score(_attr(h, "score"), scale), h) for h in hits]
    threshold = request.score_threshold or 0.0
    if threshold > 0:
        scored = [(s, h) for s, h in scored if s >= threshold]
    scored.sort(key=lambda sh: -sh[0])  # stable: the service's order among equal scores
    base = ctx.settings.app_base_url
    out.records = [build_record(h, base_url=base, knowledge_id=auth.knowledge_id, score=s) for s, h in scored[:top_k]]
    out.document_ids = list(dict.fromkeys(r["metadata"]["document_id"] for r in out.records))
    return out


# --- audit ---------------------------------------------------------------------------------------


def audit_call(
    session: Session,
    *,
    key: DifyApiKey,
    knowledge_id: str,
    knowledge_base_id: uuid.UUID | None,
    status: int,
    error_code: int | None,
    ip: str | None,
    user_agent: str | None,
    error: str | None = None,
    document_ids: Sequence[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> None:
    """One ``audit_logs`` row per identified call (actor_type ``api_key``).

    ``status`` and ``error_code`` are what Dify was answered (the adapter's wire values, the ones
    its user saw); ``error`` is OpenKB's code for the same failure.
    Calls whose key cannot be identified (malformed header, unknown key) are logged, not
    audited: they have no tenant, and writing a row per stranger's request is an amplifier.
    The query text is not stored (only its length): it may carry what the user typed.
    """
    from openkb.audit import record_audit

    actor = Principal(kind="dify_key", tenant_id=key.tenant_id, dify_key_id=key.id, allowed_kb_ids=frozenset())
    meta: dict[str, Any] = {
        "knowledge_id": knowledge_id,
        "key_name": key.name,
        "status": status,
        "document_ids": list(document_ids),
        **(extra or {}),
    }
    if error_code is not None:
        meta["error_code"] = error_code
    if error is not None:
        meta["error"] = error
    record_audit(
        session,
        tenant_id=key.tenant_id,
        actor=actor,
        action="dify.retrieval",
        object_type="knowledge_base" if knowledge_base_id else None,
        object_id=knowledge_base_id,
        metadata=meta,
        ip=ip,
        user_agent=user_agent,
    )


# --- setup info ----------------------------------------------------------------------------------


def endpoint_info(settings: Any) -> dict[str, Any]:
    """What to paste into Dify. Dify appends ``/retrieval`` itself, without stripping a trailing
    slash, so the endpoint is the bare base URL."""
    base = str(settings.app_base_url).rstrip("/")
    warnings: list[str] = []
    host = (urlparse(base).hostname or "").lower()
    if host in ("127.0.0.1", "localhost", "::1", "0.0.0.0"):
        port = urlparse(base).port or 80
        warnings.append(
            f"APP_BASE_URL is {base}: Dify (often in Docker) cannot reach a loopback address; set "
            f"APP_BASE_URL to the URL Dify can reach, e.g. http://host.docker.internal:{port} or https://kb.example.com"
        )
    if str(getattr(settings, "app_base_url_source", "")).startswith("default"):  # docs/operations.md
        warnings.append(
            f"APP_BASE_URL is unset and no `openkb up` is running: {base} is a guess: start `openkb up` first, or set APP_BASE_URL"
        )
    if base.endswith("/retrieval"):
        warnings.append("APP_BASE_URL ends with /retrieval: Dify would call /retrieval/retrieval; drop the suffix")
    return {
        "endpoint": base,
        "retrieval_url": base + "/retrieval",
        "warnings": warnings,
        "steps": [
            "Create a key: openkb dify key create --name my-dify-app --kb <knowledge base id or slug> "
            "(shown once; --json for scripts)",
            "Map the id you will type in Dify: openkb dify map --knowledge-id <any-id> --kb <the same knowledge base>",
            f"In Dify: Knowledge -> External Knowledge API -> Add. API Endpoint: {base}  API Key: the okdify_... "
            "key alone (do not type 'Bearer ')",
            "In Dify: Knowledge -> Connect to an External Knowledge Base: pick that API and enter the "
            "External Knowledge ID from step 2",
            "Check it with Dify's Retrieval Testing; each call is in OpenKB's audit log (action dify.retrieval)",
        ],
        "errors": {
            "1001": "403 malformed Authorization header",
            "1002": "403 key invalid or not allowed",
            "2001": "404 knowledge id not mapped",
            "2002": "400 malformed body",
            "3001": "429 rate limited",
            "5001": "503 search backend unavailable",
        },
    }
