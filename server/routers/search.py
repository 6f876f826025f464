"""``POST /api/search`` (docs/api.md#routes): permission-checked hybrid search for any caller.

Sessions, personal access tokens (scope ``kb:search``), share-link visitors and anonymous
readers all land in the same ``openkb.retrieval.search``; the response holds only what the
caller may read. An outsider gets ``{"results": []}`` — never a 403 that would reveal that
something matched.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from openkb.errors import DatabaseUnavailable, IndexUnavailable
from openkb.permissions import Principal
from openkb.retrieval import search, search_documents
from openkb.retrieval.service import MAX_SEARCH_KBS
from server.auth import require_scopes
from server.deps import CtxDep, SessionDep
from server.errors import errors_for
from server.schemas import RequestModel

router = APIRouter(prefix="/api", tags=["search"])

SearchPrincipal = Annotated[Principal, Depends(require_scopes("kb:search"))]


class TimeRange(RequestModel):
    model_config = ConfigDict(populate_by_name=True)  # merged with RequestModel's extra="forbid"
    from_: datetime | None = Field(None, alias="from", description="updated at or after (ISO 8601)")
    to: datetime | None = Field(None, description="updated at or before (ISO 8601)")


class SearchFiltersIn(RequestModel):
    tags: list[str] | None = Field(None, description="documents having any of these tags")
    metadata: dict[str, Any] | None = Field(None, description="documents whose metadata contains these key/values")
    time_range: TimeRange | None = None


class SearchIn(RequestModel):
    query: str = Field("", max_length=2000, description="empty: the most recently updated readable documents")
    knowledge_base_ids: list[uuid.UUID] | None = Field(
        None, max_length=MAX_SEARCH_KBS, description="only these knowledge bases (none: every readable one)"
    )
    top_k: int = Field(10, ge=1, le=100)
    filters: SearchFiltersIn | None = None
    group_by_document: bool = Field(
        True,
        description="one result per document (its best chunk, more of its "
        "matching chunks in `snippets`); top_k counts documents. "
        "false: one result per chunk, top_k counts chunks",
    )


class SnippetOut(BaseModel):
    chunk_id: uuid.UUID
    heading_path: list[str]
    content: str
    score: float
    highlights: list[list[int]] = []


class SearchResultOut(BaseModel):
    document_id: uuid.UUID
    chunk_id: uuid.UUID
    knowledge_base_id: uuid.UUID
    title: str
    path: str = Field(description="titles of the folders above the document, ' / '-separated")
    heading_path: list[str]
    content: str
    score: float
    metadata: dict[str, Any]
    tags: list[str] = []
    knowledge_base_title: str = ""
    updated_at: datetime | None = None
    highlights: list[list[int]] = Field([], description="[start, end) offsets into content of the query's words")
    snippets: list[SnippetOut] = Field([], description="grouped search: more matching chunks of this document")
    ranking: str = Field(
        "",
        description="hybrid | bm25 | hybrid+rerank | bm25+rerank; a rerank profile answering "
        "without +rerank was served degraded (its rerank service failed)",
    )
    index_status: str = Field(
        "",
        description="the document's index state: pending = its latest save is not searchable yet "
        "(this text may be from an older version); indexed; failed",
    )


class SearchOut(BaseModel):
    results: list[SearchResultOut]
    degraded: list[str] = Field(
        [],
        description='parts the search went without: "dense" (the embedding service is down: keyword '
        'results only), "rerank" (the rerank service failed); empty when fully served',
    )


@router.post(
    "/search", response_model=SearchOut, responses=errors_for(401, 403, 422, 503, IndexUnavailable, DatabaseUnavailable)
)
def post_search(body: SearchIn, ctx: CtxDep, session: SessionDep, principal: SearchPrincipal) -> dict[str, Any]:
    filters: dict[str, Any] | None = None
    if body.filters is not None:
        filters = {}
        if body.filters.tags:
            filters["tags"] = body.filters.tags
        if body.filters.metadata:
            filters["metadata"] = body.filters.metadata
        tr = body.filters.time_range
        if tr is not None and (tr.from_ or tr.to):
            filters["time_range"] = {k: v for k, v in (("from", tr.from_), ("to", tr.to)) if v is not None}
    run = search_documents if body.group_by_document else search
    degraded: list[str] = []
    results = run(
        ctx,
        session,
        principal,
        body.query,
        knowledge_base_ids=body.knowledge_base_ids,
        top_k=body.top_k,
        filters=filters,
        degraded=degraded,
    )
    return {"results": [r.as_dict() for r in results], "degraded": degraded}
