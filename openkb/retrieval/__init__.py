"""Permission-checked hybrid retrieval over the active Milvus collection (docs/retrieval.md#search-flow)."""

from openkb.retrieval.filters import SearchFilters, parse_filters
from openkb.retrieval.service import SearchResult, forget_active_profile, search, search_documents

__all__ = ["SearchFilters", "SearchResult", "forget_active_profile", "parse_filters", "search", "search_documents"]
