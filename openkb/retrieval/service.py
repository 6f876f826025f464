"""The retrieval service (docs/retrieval.md#search-flow): the one search every caller goes through.

Web sessions, personal access tokens, share-link visitors, anonymous readers of public content,
Dify keys and MCP users all call ``search``; the principal says who is asking and nothing else
changes. The flow, with its cost on the hot path:

1. ``readable_scope`` (one SQL statement) -> the Milvus prefilter over indexed scalar fields.
   The prefilter may admit extra candidates, never miss a readable one.
2. One hybrid search on the active alias (a dense and a BM25 search, fused by score with a
   relevance floor, ``milvus.fuse``: scores in [0, 1], docs/retrieval.md#scores; a RERANK
   function when the profile has one, and on rerank failure the unreranked result plus a log
   line — ``milvus.hybrid_search`` degrades, it never returns nothing because a model failed).
   It over-fetches (``top_k * 3``) so the final check can drop candidates without starving.
3. ``filter_readable_documents(..., for_search=True)`` (one SQL statement for all candidates):
   PostgreSQL is the permission truth; archived/deleted, other tenants, drafts for non-editors
   all drop out here even if the index were stale.
4. One SQL statement for display fields (current title, folder path, metadata, tags), and two
   small ones for what of its surroundings the caller may be told: the folders on the path they
   can read (only when a result has any) and the knowledge bases they can open
   (``_readable_context``; a page shared on its own names neither).

So a search costs three statements plus those two, whatever ``top_k`` is, plus one more when ``tags`` or
``metadata`` filters are given (resolved to document ids so Milvus can filter on an indexed
field). ``ctx.milvus`` is reused; the active profile is cached for a few seconds per process
(``openkb.indexing.profiles.active_spec``; after an alias switch a stale entry only shapes the request: the alias itself is resolved by
Milvus on every search).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlmodel import Session

from openkb.context import AppContext
from openkb.errors import ValidationError
from openkb.indexing import milvus as mv
from openkb.indexing.chunker import strip_index_text
from openkb.indexing.milvus import FIELD_MAP  # row field names: owned by indexing, read here
from openkb.indexing.profiles import active_spec, forget_active_profile  # noqa: F401 - re-exported
from openkb.indexing.profiles_spec import ProfileSpec
from openkb.permissions import (
    KbAction,
    Principal,
    filter_readable_documents,
    knowledge_base_capabilities,
    readable_scope,
)
from openkb.permissions import filters as F
from openkb.retrieval.filters import SearchFilters, parse_filters
from openkb.retrieval.highlight import highlight_spans

log = logging.getLogger("openkb.retrieval")

MAX_TOP_K = 100
OVERFETCH = 3
MAX_QUERY_CHARS = 2000
# Knowledge bases a caller may name in one search (REST and MCP bodies): each goes into the Milvus
# filter expression, so without a bound a body of 20,000 ids (well under the body limit) cost a
# second per search. Lists the services build themselves (an app's granted collections) are not
# capped: they are as long as what the caller was granted
MAX_SEARCH_KBS = 100
# Seconds one Milvus search route may take: a hung embedding service costs this much once, then
# the search is answered BM25-only (docs/retrieval.md#degradation), never a hang.
SEARCH_TIMEOUT_S = 20.0
_UUIDS = ARRAY(UUID(as_uuid=False))
OUTPUT_FIELDS = ("chunk_id", "document_id", "knowledge_base_id", "title", "heading_path", "content_text", "updated_at")


@dataclass
class SearchResult:
    document_id: str
    chunk_id: str
    knowledge_base_id: str
    title: str
    path: str
    heading_path: list[str]
    content: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    knowledge_base_title: str = ""
    updated_at: str | None = None
    # [start, end) offsets into ``content`` of the query's words (docs/retrieval.md#grouped-results)
    highlights: list[list[int]] = field(default_factory=list)
    # grouped search only: further matching chunks of the same document, best first
    snippets: list[dict[str, Any]] = field(default_factory=list)
    # how Milvus ranked it ("hybrid", "bm25", "hybrid+rerank", ...): with a rerank profile,
    # "hybrid" means the rerank service was down and the unreranked order was served
    ranking: str = ""
    # the document's index_status now: "pending" means its latest save is not searchable yet and
    # this text may be older (docs/retrieval.md#indexing)
    index_status: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- helpers -------------------------------------------------------------------------------------


def _uuid_strs(values: Iterable[Any] | None, what: str) -> list[str]:
    out: list[str] = []
    for v in values or ():
        try:
            out.append(str(uuid.UUID(str(v))))
        except ValueError:
            raise ValidationError(f"{what} must be UUIDs (got {v!r})", field=what) from None
    return list(dict.fromkeys(out))


def _quote(ids: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in ids) + "]"


_DOC_FILTER_SQL = """
SELECT d.id::text FROM documents d
WHERE d.type = 'page' AND d.status IN ('published', 'draft') AND d.deleted_at IS NULL
  {tenant} {kbs} {tags} {meta}
LIMIT :cap
"""


def _documents_matching(
    session: Session, tenant_id: str | None, kb_ids: list[str], f: SearchFilters, cap: int
) -> list[str]:
    sql = _DOC_FILTER_SQL.format(
        tenant="AND d.tenant_id = CAST(:tenant AS uuid)" if tenant_id else "",
        kbs="AND d.knowledge_base_id = ANY(:kbs)" if kb_ids else "",
        tags="AND d.tags && CAST(:tags AS text[])" if f.tags else "",
        meta="AND d.metadata @> :meta" if f.metadata else "",
    )
    stmt = text(sql)
    params: dict[str, Any] = {"cap": cap}
    if tenant_id:
        params["tenant"] = tenant_id
    if kb_ids:
        stmt = stmt.bindparams(bindparam("kbs", type_=_UUIDS))
        params["kbs"] = kb_ids
    if f.tags:
        params["tags"] = list(f.tags)
    if f.metadata:
        stmt = stmt.bindparams(bindparam("meta", type_=JSONB))
        params["meta"] = dict(f.metadata)
    return [r[0] for r in session.execute(stmt, params).all()]


_DETAILS_SQL = text("""
WITH RECURSIVE up(doc_id, anc_id, depth) AS (
    SELECT d.id, d.parent_id, 1 FROM documents d WHERE d.id = ANY(:ids) AND d.parent_id IS NOT NULL
    UNION ALL
    SELECT up.doc_id, p.parent_id, up.depth + 1 FROM up JOIN documents p ON p.id = up.anc_id
    WHERE p.parent_id IS NOT NULL AND up.depth < 64
)
SELECT d.id::text AS id, d.title, d.knowledge_base_id::text AS kb_id, d.metadata AS meta, d.tags, d.updated_at,
       d.index_status,
       k.title AS kb_title,
       (SELECT array_agg(a.title ORDER BY u.depth DESC) FROM up u JOIN documents a ON a.id = u.anc_id
         WHERE u.doc_id = d.id) AS path,
       (SELECT array_agg(u.anc_id::text ORDER BY u.depth DESC) FROM up u WHERE u.doc_id = d.id) AS path_ids
FROM documents d JOIN knowledge_bases k ON k.id = d.knowledge_base_id
WHERE d.id = ANY(:ids)
""").bindparams(bindparam("ids", type_=_UUIDS))


def _details(session: Session, doc_ids: Sequence[str]) -> dict[str, Mapping[str, Any]]:
    if not doc_ids:
        return {}
    return {r["id"]: r for r in session.execute(_DETAILS_SQL, {"ids": list(doc_ids)}).mappings().all()}


@dataclass(frozen=True)
class _Context:
    """What of a result's surroundings the caller may be told: the folders above it they can read
    and the knowledge bases they can open (ids as text)."""

    folders: frozenset[str]
    knowledge_bases: frozenset[str]


def _readable_context(session: Session, principal: Principal, dets: Sequence[Mapping[str, Any]]) -> _Context:
    """A result the caller may read can sit in a folder or a knowledge base they may not (a page
    shared on its own, docs/permissions.md#permission-mode): the result then names neither, as
    the document's breadcrumb leaves a hidden folder out and a knowledge base that answers them
    404 is not named (docs/permissions.md#outsiders-get-404). One statement for the folders
    (when any result has one) and one for the knowledge bases."""
    if principal.kind == "system":
        return _Context(
            frozenset(i for d in dets for i in d.get("path_ids") or ()),
            frozenset(str(d.get("kb_id")) for d in dets),
        )
    folders = list(dict.fromkeys(i for d in dets for i in d.get("path_ids") or ()))
    readable = {str(i) for i in filter_readable_documents(session, principal, folders)} if folders else set()
    kb_ids = list(dict.fromkeys(str(d.get("kb_id")) for d in dets if d.get("kb_id")))
    caps = knowledge_base_capabilities(session, principal, kb_ids) if kb_ids else {}
    return _Context(frozenset(readable), frozenset(str(k) for k, acts in caps.items() if KbAction.READ in acts))


def _result(
    hit_fields: Mapping[str, Any], score: float, det: Mapping[str, Any], ranking: str, seen: _Context
) -> SearchResult:
    heading = list(hit_fields.get("heading_path") or [])
    content = strip_index_text(hit_fields.get("title") or "", heading, hit_fields.get("content_text") or "")
    upd = det.get("updated_at")
    return SearchResult(
        document_id=str(hit_fields.get("document_id")),
        chunk_id=str(hit_fields.get("chunk_id")),
        knowledge_base_id=str(det.get("kb_id") or hit_fields.get("knowledge_base_id")),
        title=det.get("title") or "",
        path=" / ".join(t for i, t in zip(det.get("path_ids") or (), det.get("path") or ()) if i in seen.folders),
        heading_path=heading,
        content=content,
        score=float(score),
        metadata=dict(det.get("meta") or {}),
        tags=list(det.get("tags") or []),
        knowledge_base_title=(det.get("kb_title") or "") if str(det.get("kb_id")) in seen.knowledge_bases else "",
        updated_at=upd.isoformat() if isinstance(upd, datetime) else None,
        ranking=ranking,
        index_status=det.get("index_status") or "",
    )


# --- search --------------------------------------------------------------------------------------


@dataclass
class SearchPlan:
    """What the service decided before calling Milvus (the filter is also what a test can inspect)."""

    filter: str
    collection: str | None
    spec: ProfileSpec | None
    post_filter: bool
    nothing: bool = False


def plan(
    ctx: AppContext,
    session: Session,
    principal: Principal,
    *,
    knowledge_base_ids: Iterable[Any] | None,
    filters: SearchFilters,
) -> SearchPlan:
    scope = readable_scope(session, principal)
    collection, spec = active_spec(ctx, session)
    if scope.filter is F.FALSE or collection is None:
        return SearchPlan("", collection, spec, False, nothing=True)
    parts = [scope.to_milvus_filter(FIELD_MAP), "is_current == true"]
    kb_ids = _uuid_strs(knowledge_base_ids, "knowledge_base_ids")
    if knowledge_base_ids is not None and not kb_ids:
        return SearchPlan("", collection, spec, False, nothing=True)
    if kb_ids:
        parts.append(f"knowledge_base_id in {_quote(kb_ids)}")
    if filters.updated_from:
        parts.append(f"updated_at >= {int(filters.updated_from.timestamp() * 1000)}")
    if filters.updated_to:
        parts.append(f"updated_at <= {int(filters.updated_to.timestamp() * 1000)}")
    post = not filters.empty
    if filters.by_document:
        docs = _documents_matching(session, scope.tenant_id, kb_ids, filters, mv.MAX_FILTER_IDS + 1)
        if not docs:
            return SearchPlan("", collection, spec, post, nothing=True)
        if len(docs) <= mv.MAX_FILTER_IDS:
            parts.append(f"document_id in {_quote(docs)}")
    return SearchPlan(mv.and_filters(*parts), collection, spec, post)


def search(
    ctx: AppContext,
    session: Session,
    principal: Principal,
    query: str,
    knowledge_base_ids: Iterable[Any] | None = None,
    top_k: int = 10,
    filters: Mapping[str, Any] | SearchFilters | None = None,
    degraded: list[str] | None = None,
) -> list[SearchResult]:
    """Chunks the principal may read, best first; an empty query lists recently updated
    documents (one chunk each, their first). Each result carries ``highlights``. ``degraded``,
    when given, receives what the search went without ("dense", "rerank";
    docs/retrieval.md#degradation)."""
    if not isinstance(top_k, int) or top_k < 1 or top_k > MAX_TOP_K:
        raise ValidationError(f"top_k must be between 1 and {MAX_TOP_K}", field="top_k")
    results = _search_chunks(ctx, session, principal, query, knowledge_base_ids, top_k, filters, degraded)
    for r in results:
        r.highlights = highlight_spans(query or "", r.content)
    return results


MAX_SNIPPETS = 5
GROUP_OVERFETCH = 3  # chunks fetched per wanted document, so a few chatty documents can't starve the list


def search_documents(
    ctx: AppContext,
    session: Session,
    principal: Principal,
    query: str,
    knowledge_base_ids: Iterable[Any] | None = None,
    top_k: int = 10,
    filters: Mapping[str, Any] | SearchFilters | None = None,
    snippets: int = 2,
    degraded: list[str] | None = None,
) -> list[SearchResult]:
    """Documents the principal may read, best first (docs/retrieval.md#grouped-results): each
    result is the document's best chunk, with up to ``snippets`` more of its matching chunks in
    ``snippets``; ``top_k`` counts documents.

    Grouping happens *after* the final permission check, on results that passed it: a group is
    keyed by the checked result's own ``document_id``, so a hidden document never forms a group
    and no chunk of one document can join another's."""
    if not isinstance(top_k, int) or top_k < 1 or top_k > MAX_TOP_K:
        raise ValidationError(f"top_k must be between 1 and {MAX_TOP_K}", field="top_k")
    if not isinstance(snippets, int) or snippets < 0 or snippets > MAX_SNIPPETS:
        raise ValidationError(f"snippets must be between 0 and {MAX_SNIPPETS}", field="snippets")
    chunks = _search_chunks(
        ctx,
        session,
        principal,
        query,
        knowledge_base_ids,
        min(top_k * GROUP_OVERFETCH, MAX_TOP_K * GROUP_OVERFETCH),
        filters,
        degraded,
    )
    groups: dict[str, SearchResult] = {}
    for r in chunks:
        r.highlights = highlight_spans(query or "", r.content)
        head = groups.get(r.document_id)
        if head is None:
            if len(groups) < top_k:
                groups[r.document_id] = r
        elif len(head.snippets) < snippets:
            head.snippets.append(
                {
                    "chunk_id": r.chunk_id,
                    "heading_path": r.heading_path,
                    "content": r.content,
                    "score": r.score,
                    "highlights": r.highlights,
                }
            )
    return list(groups.values())


def _search_chunks(
    ctx: AppContext,
    session: Session,
    principal: Principal,
    query: str,
    knowledge_base_ids: Iterable[Any] | None,
    top_k: int,
    filters: Mapping[str, Any] | SearchFilters | None,
    degraded: list[str] | None = None,
) -> list[SearchResult]:
    query = _searchable(query)
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationError(f"query is longer than {MAX_QUERY_CHARS} characters", field="query")
    f = parse_filters(filters)
    p = plan(ctx, session, principal, knowledge_base_ids=knowledge_base_ids, filters=f)
    if p.nothing or p.spec is None:
        return []
    alias = ctx.settings.milvus_active_alias
    if not query:
        return _recent(ctx, session, principal, p, alias, top_k, f)
    limit = min(top_k * OVERFETCH, 16384)
    try:
        return _hybrid_rounds(ctx, session, principal, query, p, alias, limit, top_k, f, degraded)
    finally:
        if ctx.milvus.take_reloaded():  # Milvus restarted: warm it again for the next users
            _warm_later(ctx, alias, p.spec)


def _searchable(query: str | None) -> str:
    """The query as the embedder and the analyzer can take it: a lone surrogate (half an emoji,
    left by a client that cuts queries by length) cannot be encoded as UTF-8 and failed the
    hybrid search, which then degraded to keywords; it becomes U+FFFD, and a NUL a space."""
    q = (query or "").replace("\x00", " ")
    if any("\ud800" <= ch <= "\udfff" for ch in q):
        q = q.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return q.strip()


_warming: set[str] = set()
_warming_lock = threading.Lock()


def _warm_later(ctx: AppContext, alias: str, spec: ProfileSpec) -> None:
    """Warm ``alias`` in a background thread, once at a time per alias (docs/operations.md#outages):
    after a Milvus restart the collection is loaded by the first search but stays cold (Lite's
    first searches pay its warm-up)."""
    with _warming_lock:
        if alias in _warming:
            return
        _warming.add(alias)

    def run() -> None:
        try:
            mv.warm(ctx.milvus, alias, spec, budget_s=60.0)
        except Exception as exc:  # noqa: BLE001 - the next search will tell
            log.info("re-warm of %s after a reload failed: %s", alias, str(exc).splitlines()[0][:200])
        finally:
            with _warming_lock:
                _warming.discard(alias)

    threading.Thread(target=run, name="openkb-rewarm", daemon=True).start()


def _hybrid_rounds(
    ctx: AppContext,
    session: Session,
    principal: Principal,
    query: str,
    p: SearchPlan,
    alias: str,
    limit: int,
    top_k: int,
    f: SearchFilters,
    degraded: list[str] | None,
) -> list[SearchResult]:
    results: list[SearchResult] = []
    for attempt in range(2):
        hits = mv.hybrid_search(
            ctx.milvus,
            alias,
            query,
            p.filter,
            limit,
            p.spec,
            output_fields=OUTPUT_FIELDS,
            degraded=degraded,
            timeout=SEARCH_TIMEOUT_S,
        )
        results = _finish(session, principal, hits, top_k, f if p.post_filter else None)
        if len(results) >= top_k or len(hits) < limit or attempt == 1:
            break
        # the final check dropped too many: one wider round (rare: a stale or coarse prefilter)
        limit = min(top_k * OVERFETCH * 10, 16384)
    return results


def _finish(
    session: Session, principal: Principal, hits: Sequence[mv.Hit], top_k: int, post: SearchFilters | None
) -> list[SearchResult]:
    doc_ids = list(dict.fromkeys(str(h.document_id) for h in hits if h.document_id))
    if not doc_ids:
        return []
    allowed = {str(d) for d in filter_readable_documents(session, principal, doc_ids, for_search=True)}
    details = _details(session, [d for d in doc_ids if d in allowed])
    kept: list[tuple[mv.Hit, Mapping[str, Any]]] = []
    for h in hits:
        det = details.get(str(h.document_id))
        if det is None:
            continue
        if post is not None and not post.accepts(det.get("tags"), det.get("meta"), det.get("updated_at")):
            continue
        kept.append((h, det))
        if len(kept) >= top_k:
            break
    seen = (
        _readable_context(session, principal, [det for _, det in kept]) if kept else _Context(frozenset(), frozenset())
    )
    return [_result(h.fields, h.score, det, h.ranking, seen) for h, det in kept]


def _recent(
    ctx: AppContext, session: Session, principal: Principal, p: SearchPlan, alias: str, top_k: int, f: SearchFilters
) -> list[SearchResult]:
    rows = mv.recent(ctx.milvus, alias, p.filter, limit=top_k * 8, output_fields=(*OUTPUT_FIELDS, "metadata"))
    first: dict[str, dict[str, Any]] = {}
    for r in rows:  # newest documents first; keep each document's first chunk
        d = str(r.get("document_id"))
        cur = first.get(d)
        if cur is None or (r.get("metadata") or {}).get("ordinal", 0) < (cur.get("metadata") or {}).get("ordinal", 0):
            first[d] = r
    hits = [mv.Hit(id=str(r.get("chunk_id")), score=0.0, fields=r) for r in first.values()]
    return _finish(session, principal, hits, top_k, f if p.post_filter else None)
