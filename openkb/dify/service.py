"""``POST /retrieval`` for Dify's External Knowledge API, app-key-bound (spec docs/11).

Flow of one call (the router owns the two units of work)::

    parse Authorization            -> 403 1001
    parse + validate the JSON body -> 400 2002 (after the key check: no body oracle for strangers)
    ONE query: key by hash + mapping of (key's tenant, knowledge_id)
        unknown / disabled / revoked / expired key            -> 403 1002
    rate limit per key (fixed window in PostgreSQL)           -> 429 3001 + Retry-After
    last_used_at (at most once a minute)
    knowledge_id == ""  (Dify's registration probe)           -> 200 {"records": []}
    mapping missing / disabled / other tenant's               -> 404 2001
    mapped knowledge base not in the key's allow-list         -> 403 1002
    -- commit (counter, last_used_at, failure audit): short, so hot keys don't queue on row locks
    openkb.retrieval.search(principal = this key narrowed to that one knowledge base)
        (scope prefilter -> Milvus hybrid -> PostgreSQL final check: published, readable)
    metadata_condition AND the key's allowed_metadata_filters (conditions.py), score_threshold
    (0.0/null = off), top_k (request's, capped by the key's limit; null -> the limit)
    one audit row; commit

Error table (Dify shows the body to the user; it does not parse the code):

====  ======  ============================================================================
HTTP  code    meaning
====  ======  ============================================================================
403   1001    Authorization header missing or not exactly ``Bearer <key>`` (also "Bearer Bearer x")
403   1002    authorization failed: unknown, disabled, revoked or expired key; or the key may not
              read the knowledge base that knowledge_id maps to
404   2001    knowledge_id not mapped (or mapping disabled, or in another tenant)
400   2002    malformed request body (not JSON, wrong types, unknown comparison_operator ...)
429   3001    this key's rate limit is exhausted (Retry-After says when the window resets)
503   5001    the search backend is unavailable (Dify retries 503)
500   5000    unexpected server error
====  ======  ============================================================================

``error_code`` 1001/1002/2001 follow Dify's documentation; 2002/3001/500x are OpenKB's.
422 is never returned: FastAPI's validation shape would be shown raw in Dify.

Metadata filtering DECISION: the condition language (every Dify operator, and/or, Unicode and
ASCII forms) is richer than the retrieval service's ``filters`` (tags any-of, metadata
equality, updated_at range), so it is evaluated here, exactly, in Python (``conditions.py``)
on each hit's document as the retrieval service read it from PostgreSQL for its final check
(metadata, tags, title, updated_at: no extra query; ``created_at`` costs one when a condition
names it). What the retrieval filters can express *soundly* is pushed down: a ``tags is|in``
condition AND-ed at the top becomes ``filters={"tags": [...]}`` (property-tested never to
hide a match). Otherwise the search over-fetches ``OVERFETCH x top_k`` (capped at the
service's MAX_TOP_K, 100) and filters that. Trade-off, named: a condition matching a small
share of a large knowledge base can return fewer than top_k records. An exact fix needs the
retrieval service to accept a document-id restriction (it already resolves tags/metadata to
``document_id in [...]`` internally); until then this is the documented limit.

Scores: see ``RRF_MAX`` below — RRF-fused scores are rescaled to 0-1 for Dify's threshold.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError as PydanticValidationError, field_validator
from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID as PG_UUID
from sqlmodel import Session, select

from openkb.dify import conditions as cond
from openkb.dify import keys as keys_svc
from openkb.errors import Unauthenticated
from openkb.models import DifyApiKey, DifyKnowledgeMapping
from openkb.permissions.principal import Principal

log = logging.getLogger("openkb.dify")

# error codes ------------------------------------------------------------------------------------
BAD_AUTH_HEADER = 1001
AUTH_FAILED = 1002
KNOWLEDGE_NOT_FOUND = 2001
BAD_REQUEST = 2002
RATE_LIMITED = 3001
INTERNAL = 5000
UNAVAILABLE = 5001

# limits -----------------------------------------------------------------------------------------
MAX_BODY_BYTES = 256 * 1024
MAX_QUERY_CHARS = 10_000  # refused above this; the search itself takes the first 2000
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


class DifyError(Exception):
    """A Dify-shaped failure: ``{"error_code", "error_msg"}`` with ``status``."""

    def __init__(self, status: int, error_code: int, error_msg: str, *, headers: dict[str, str] | None = None,
                 key: DifyApiKey | None = None, audit: Mapping[str, Any] | None = None) -> None:
        super().__init__(error_msg)
        self.status = status
        self.error_code = error_code
        self.error_msg = error_msg
        self.headers = headers or {}
        self.key = key
        self.audit = dict(audit or {})

    def body(self) -> dict[str, Any]:
        return {"error_code": self.error_code, "error_msg": self.error_msg}


# --- request -------------------------------------------------------------------------------------


class RetrievalSetting(BaseModel):
    model_config = ConfigDict(extra="ignore")

    top_k: int | None = Field(None, description="null = the key's limit; capped by it")
    score_threshold: float | None = Field(None, description="0.0 or null = disabled")

    @field_validator("top_k")
    @classmethod
    def _positive(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError("top_k must be at least 1")
        return v

    @field_validator("score_threshold")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not (v == v and abs(v) != float("inf")):
            raise ValueError("score_threshold must be a finite number")
        return v


class RetrievalRequest(BaseModel):
    """Dify's body. ``knowledge_id`` "" is the registration probe; extra fields are ignored."""

    model_config = ConfigDict(extra="ignore")

    knowledge_id: str = ""
    query: str = ""
    retrieval_setting: RetrievalSetting | None = None
    metadata_condition: dict[str, Any] | None = None

    @field_validator("query")
    @classmethod
    def _query(cls, v: str) -> str:
        if len(v) > MAX_QUERY_CHARS:
            raise ValueError(f"query is longer than {MAX_QUERY_CHARS} characters")
        return v

    @field_validator("knowledge_id")
    @classmethod
    def _kid(cls, v: str) -> str:
        v = v.strip()
        if len(v) > 255:
            raise ValueError("knowledge_id is longer than 255 characters")
        return v


@dataclass(frozen=True)
class ParsedRequest:
    body: RetrievalRequest
    condition: cond.Group | None


def parse_authorization(header: str | None) -> str:
    """Exactly ``Bearer <key>``: scheme case-insensitive, one token, no spaces in it.

    Trap: users paste "Bearer okdify_..." into Dify's key field, which then sends
    "Bearer Bearer okdify_...". That is a malformed header (1001), not an unknown key, so the
    message can say what went wrong.
    """
    if header is None or not header.strip():
        raise DifyError(403, BAD_AUTH_HEADER, "missing Authorization header; expected 'Authorization: Bearer okdify_...'")
    parts = header.strip().split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        hint = ""
        if len(parts) >= 3 and parts[0].lower() == "bearer" and parts[1].lower() == "bearer":
            hint = " ('Bearer ' was typed into the key: paste only the okdify_... key in Dify)"
        raise DifyError(403, BAD_AUTH_HEADER, "invalid Authorization header format; expected 'Bearer <api-key>'" + hint)
    return parts[1]


def parse_body(raw: bytes) -> ParsedRequest:
    """JSON (``\\uXXXX`` escapes included) -> validated request; any problem is 400 2002."""
    if len(raw) > MAX_BODY_BYTES:
        raise DifyError(400, BAD_REQUEST, f"request body larger than {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8") if raw else "{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DifyError(400, BAD_REQUEST, f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise DifyError(400, BAD_REQUEST, "request body must be a JSON object")
    try:
        body = RetrievalRequest.model_validate(data)
    except PydanticValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise DifyError(400, BAD_REQUEST, f"invalid request body: {loc}: {first.get('msg', 'invalid')}") from None
    try:
        condition = cond.parse_condition(body.metadata_condition)
    except cond.ConditionError as exc:
        raise DifyError(400, BAD_REQUEST, f"invalid metadata_condition: {exc.detail}") from None
    return ParsedRequest(body=body, condition=condition)


# --- phase 1: who is calling, for what -----------------------------------------------------------


@dataclass(frozen=True)
class Authorized:
    key: DifyApiKey
    knowledge_id: str
    knowledge_base_id: uuid.UUID | None      # None: the registration probe
    principal: Principal                     # narrowed to knowledge_base_id
    key_condition: cond.Group | None
    top_k_limit: int


def _rate_limit(ctx_settings: Any) -> int:
    v = getattr(ctx_settings, "openkb_dify_rate_limit_per_minute", None)
    return int(v) if isinstance(v, int) and v > 0 else DEFAULT_RATE_LIMIT_PER_MINUTE


def _lookup(session: Session, token: str, knowledge_id: str) -> tuple[DifyApiKey | None, DifyKnowledgeMapping | None]:
    """The key by hash and, in the same round trip, its tenant's mapping of ``knowledge_id``."""
    from openkb.security import hash_token

    if not keys_svc.looks_like_key(token):
        return None, None
    row = session.exec(
        select(DifyApiKey, DifyKnowledgeMapping)  # type: ignore[call-overload]
        .outerjoin(DifyKnowledgeMapping, (DifyKnowledgeMapping.tenant_id == DifyApiKey.tenant_id)
                   & (DifyKnowledgeMapping.dify_knowledge_id == knowledge_id))
        .where(DifyApiKey.key_hash == hash_token(token))
    ).first()
    if row is None:
        return None, None
    return row[0], row[1]


def dify_principal(key: DifyApiKey, knowledge_base_id: uuid.UUID | None) -> Principal:
    """The key as a principal, narrowed to the one knowledge base this call is about.

    ``readable_scope`` and the final check intersect ``allowed_kb_ids`` with the key's row as
    re-read from PostgreSQL, so a revocation between phase 1 and the search still wins.
    """
    p = Principal.dify(key)
    return replace(p, allowed_kb_ids=frozenset({knowledge_base_id}) if knowledge_base_id else frozenset())


def authorize(session: Session, settings: Any, *, authorization: str | None, raw_body: bytes,
              now: datetime | None = None) -> tuple[Authorized, ParsedRequest]:
    from openkb import ratelimit

    token = parse_authorization(authorization)
    body_error: DifyError | None = None
    try:
        parsed: ParsedRequest | None = parse_body(raw_body)
    except DifyError as exc:
        body_error, parsed = exc, None
    knowledge_id = parsed.body.knowledge_id if parsed else ""
    key, mapping = _lookup(session, token, knowledge_id)
    if key is None:
        hint = "" if keys_svc.looks_like_key(token) else " (OpenKB Dify keys start with okdify_)"
        raise DifyError(403, AUTH_FAILED, "authorization failed: invalid API key" + hint)
    status = keys_svc.effective_status(key, now)
    audit = {"knowledge_id": knowledge_id}
    if status != "active":
        raise DifyError(403, AUTH_FAILED, f"authorization failed: the API key is {status}", key=key, audit=audit)
    if not ratelimit.hit(session, f"dify:{key.id}", _rate_limit(settings), RATE_WINDOW_S):
        retry = max(1, RATE_WINDOW_S - int(time.time()) % RATE_WINDOW_S)
        raise DifyError(429, RATE_LIMITED, f"rate limit exceeded for this API key; retry in {retry}s",
                        headers={"Retry-After": str(retry)}, key=key, audit=audit)
    keys_svc.touch_last_used(session, key, now)
    if body_error is not None or parsed is None:
        assert body_error is not None
        body_error.key, body_error.audit = key, audit
        raise body_error
    try:
        key_condition = cond.parse_condition(key.allowed_metadata_filters or None)
    except cond.ConditionError:
        # normalize_metadata_filters refuses these at write time; a hand-edited row fails closed.
        log.error("dify key %s has an unreadable allowed_metadata_filters; refusing", key.id)
        raise DifyError(403, AUTH_FAILED, "authorization failed: this key's metadata filter is invalid",
                        key=key, audit=audit) from None
    if knowledge_id == "":
        return Authorized(key, "", None, _principal(key, None, audit), key_condition, key.retrieval_top_k_limit), parsed
    if mapping is None or mapping.status != "active":
        raise DifyError(404, KNOWLEDGE_NOT_FOUND, f"knowledge does not exist: {knowledge_id!r} is not mapped "
                                                  "(openkb dify map --knowledge-id ... --kb ...)", key=key, audit=audit)
    kb_id = mapping.knowledge_base_id
    audit["knowledge_base_id"] = str(kb_id)
    if kb_id not in set(key.allowed_knowledge_base_ids or ()):
        raise DifyError(403, AUTH_FAILED, f"authorization failed: this API key may not read {knowledge_id!r}",
                        key=key, audit=audit)
    return Authorized(key, knowledge_id, kb_id, _principal(key, kb_id, audit), key_condition,
                      key.retrieval_top_k_limit), parsed


def _principal(key: DifyApiKey, kb_id: uuid.UUID | None, audit: dict[str, Any]) -> Principal:
    try:
        return dify_principal(key, kb_id)
    except Unauthenticated:  # expired in the microseconds since the status check
        raise DifyError(403, AUTH_FAILED, "authorization failed: the API key is expired", key=key,
                        audit=audit) from None


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
    bindparam("ids", type_=ARRAY(PG_UUID(as_uuid=False))))
_CREATED_NAMES = frozenset({"created_at", "upload_date"})


def _doc_fields(hit: Any, created: Mapping[str, Any]) -> cond.DocFields:
    """What a condition sees of a hit's document: the retrieval service's PostgreSQL read of its
    metadata, tags, title and updated_at (the final check's snapshot), plus created_at if asked."""
    doc_id = str(_attr(hit, "document_id"))
    builtins = {"title": _attr(hit, "title"), "updated_at": _attr(hit, "updated_at"), "document_id": doc_id}
    if doc_id in created:
        builtins["created_at"] = created[doc_id]
    return cond.DocFields(metadata=_attr(hit, "metadata") or {}, tags=list(_attr(hit, "tags") or ()),
                          builtins=builtins)


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


# Milvus fuses dense + BM25 with RRFRanker(60) (openkb.indexing.milvus.hybrid_search): a chunk
# ranked first by both routes scores 2/61. Dify's score_threshold is a 0-1 relevance slider
# (0.5 is a common setting), so raw RRF scores (~0.016-0.033) would make any threshold drop
# everything. DECISION: for RRF-fused results the score sent to Dify (and thresholded) is
# raw / (2/61), clamped to 1.0: 1.0 = top of both routes, 0.5 = top of one. Reranked and
# BM25-only scores are passed through unchanged (rerankers already answer 0-1).
RRF_K = 60
RRF_MAX = 2.0 / (RRF_K + 1)


def score_scale(ctx: Any, session: Session) -> float:
    """Factor applied to retrieval scores for Dify (1.0 = unchanged)."""
    from openkb.retrieval.service import active_spec

    _, spec = active_spec(ctx, session)
    if spec is not None and spec.has_dense and spec.rerank is None:
        return 1.0 / RRF_MAX
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
    meta: dict[str, Any] = {str(k): v for k, v in own.items() if k not in DIFY_RESERVED_META} \
        if isinstance(own, Mapping) else {}
    meta.update({
        "document_id": doc_id, "chunk_id": str(_attr(hit, "chunk_id")), "knowledge_base_id": kb_id,
        "knowledge_id": knowledge_id, "path": str(_attr(hit, "path") or ""),
        "heading_path": [str(h) for h in (_attr(hit, "heading_path") or ())],
        "url": document_url(base_url, kb_id, doc_id), "tags": [str(t) for t in (_attr(hit, "tags") or ())],
    })
    if _attr(hit, "updated_at"):
        meta["updated_at"] = _attr(hit, "updated_at")
    return {"content": str(_attr(hit, "content") or ""), "score": score, "title": _title(hit),
            "metadata": _jsonable(meta)}


def effective_top_k(requested: int | None, limit: int) -> int:
    return max(1, min(requested or limit, limit))


def retrieve(ctx: Any, session: Session, auth: Authorized, parsed: ParsedRequest) -> Outcome:
    """Phase 2: ``openkb.retrieval.search`` (scope prefilter -> Milvus -> PostgreSQL final check),
    then the metadata condition, score threshold and top_k, in that order.

    The condition is exact here (conditions.py) on the documents as the final check read them.
    What the retrieval filters can express soundly is pushed down (``tags is|in``, AND-ed), and
    otherwise the search over-fetches ``OVERFETCH x top_k`` (at most the service's MAX_TOP_K)
    before filtering: a very selective condition on a large knowledge base may then return
    fewer than top_k records (the trade-off is documented in the module docstring).
    """
    from openkb.retrieval import search
    from openkb.retrieval.service import MAX_QUERY_CHARS as SEARCH_MAX_QUERY, MAX_TOP_K

    body = parsed.body
    setting = body.retrieval_setting or RetrievalSetting()
    top_k = min(effective_top_k(setting.top_k, auth.top_k_limit), MAX_TOP_K)
    out = Outcome(top_k=top_k)
    query = body.query.strip()
    if auth.knowledge_base_id is None or not query:
        return out
    if len(query) > SEARCH_MAX_QUERY:
        # Dify shows errors to the end user mid-chat; the first 2000 characters still retrieve.
        query, out.query_truncated = query[:SEARCH_MAX_QUERY], True
    condition = cond.all_of(auth.key_condition, parsed.condition)
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
    hits = search(ctx, session, auth.principal, query, knowledge_base_ids=[auth.knowledge_base_id],
                  top_k=fetch, filters=filters)
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
    threshold = setting.score_threshold or 0.0
    if threshold > 0:
        scored = [(s, h) for s, h in scored if s >= threshold]
    scored.sort(key=lambda sh: -sh[0])  # stable: the service's order among equal scores
    base = ctx.settings.app_base_url
    out.records = [build_record(h, base_url=base, knowledge_id=auth.knowledge_id, score=s) for s, h in scored[:top_k]]
    out.document_ids = list(dict.fromkeys(r["metadata"]["document_id"] for r in out.records))
    return out


# --- audit ---------------------------------------------------------------------------------------


def audit_call(session: Session, *, key: DifyApiKey, knowledge_id: str, knowledge_base_id: uuid.UUID | None,
               status: int, error_code: int | None, ip: str | None, user_agent: str | None,
               document_ids: Sequence[str] = (), extra: Mapping[str, Any] | None = None) -> None:
    """One ``audit_logs`` row per identified call (actor_type ``api_key``).

    Calls whose key cannot be identified (malformed header, unknown key) are logged, not
    audited: they have no tenant, and writing a row per stranger's request is an amplifier.
    The query text is not stored (only its length): it may carry what the user typed.
    """
    from openkb.audit import record_audit

    actor = Principal(kind="dify_key", tenant_id=key.tenant_id, dify_key_id=key.id, allowed_kb_ids=frozenset())
    meta: dict[str, Any] = {"knowledge_id": knowledge_id, "key_name": key.name, "status": status,
                            "document_ids": list(document_ids), **(extra or {})}
    if error_code is not None:
        meta["error_code"] = error_code
    record_audit(session, tenant_id=key.tenant_id, actor=actor, action="dify.retrieval",
                 object_type="knowledge_base" if knowledge_base_id else None, object_id=knowledge_base_id,
                 metadata=meta, ip=ip, user_agent=user_agent)


# --- setup info ----------------------------------------------------------------------------------


def endpoint_info(settings: Any) -> dict[str, Any]:
    """What to paste into Dify. Dify appends ``/retrieval`` itself, without stripping a trailing
    slash, so the endpoint is the bare base URL."""
    base = str(settings.app_base_url).rstrip("/")
    warnings: list[str] = []
    host = (urlparse(base).hostname or "").lower()
    if host in ("127.0.0.1", "localhost", "::1", "0.0.0.0"):
        warnings.append(f"APP_BASE_URL is {base}: Dify (often in Docker) cannot reach a loopback address; set "
                        "APP_BASE_URL to the URL Dify can reach, e.g. http://host.docker.internal:8000 or https://kb.example.com")
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
        "errors": {"1001": "403 malformed Authorization header", "1002": "403 key invalid or not allowed",
                   "2001": "404 knowledge id not mapped", "2002": "400 malformed body",
                   "3001": "429 rate limited", "5001": "503 search backend unavailable"},
    }
