"""Search filters of ``POST /api/search`` (``filters: {tags?, metadata?, time_range?}``).

Tags match when the document has *any* of them; ``metadata`` matches by containment (every
given key equals the document's value); ``time_range`` bounds the document's ``updated_at``
(``{"from": ISO, "to": ISO}``, either end optional; ``gte``/``lte`` and ``start``/``end`` are
accepted as synonyms). Unknown keys are refused rather than ignored, so a typo never silently
widens a search. A tag, or a metadata key or string value at any depth, with a NUL or a lone
surrogate is a ``VALIDATION_ERROR`` naming ``filters.tags``/``filters.metadata``, as a document
write refuses it (``openkb.content.limits``), never a database error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from openkb.content.limits import check_json_text, check_text
from openkb.errors import ValidationError

MAX_TAGS = 50
_FROM_KEYS = ("from", "gte", "start", "after")
_TO_KEYS = ("to", "lte", "end", "before")


@dataclass(frozen=True)
class SearchFilters:
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    updated_from: datetime | None = None
    updated_to: datetime | None = None

    @property
    def by_document(self) -> bool:
        """Filters that PostgreSQL resolves into a document-id list (Milvus can't index JSON)."""
        return bool(self.tags or self.metadata)

    @property
    def empty(self) -> bool:
        return not (self.by_document or self.updated_from or self.updated_to)

    def accepts(self, tags: list[str] | None, meta: Mapping[str, Any] | None, updated_at: datetime | None) -> bool:
        if self.tags and not set(self.tags) & set(tags or ()):
            return False
        if self.metadata:
            m = meta or {}
            if any(k not in m or m[k] != v for k, v in self.metadata.items()):
                return False
        if updated_at is not None:
            if self.updated_from and updated_at < self.updated_from:
                return False
            if self.updated_to and updated_at > self.updated_to:
                return False
        return True


def _time(value: Any, where: str) -> datetime:
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):  # Unix seconds
        try:
            dt = datetime.fromtimestamp(float(value), UTC)
        except (OverflowError, OSError, ValueError):  # past the year 9999, NaN, infinity
            raise ValidationError(f"{where} is out of range as Unix seconds: {value!r:.40}", field=where) from None
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValidationError(f"{where} is not an ISO 8601 time: {value!r}", field=where) from None
    else:
        raise ValidationError(f"{where} must be an ISO 8601 time", field=where)
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def parse_filters(raw: Mapping[str, Any] | SearchFilters | None) -> SearchFilters:
    if raw is None:
        return SearchFilters()
    if isinstance(raw, SearchFilters):
        return raw
    if not isinstance(raw, Mapping):
        raise ValidationError("filters must be an object", field="filters")
    unknown = set(raw) - {"tags", "metadata", "time_range"}
    if unknown:
        raise ValidationError(
            f"unknown filter(s): {', '.join(sorted(unknown))} (known: tags, metadata, time_range)", field="filters"
        )
    tags = raw.get("tags") or ()
    if isinstance(tags, str):
        tags = (tags,)
    if not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags):
        raise ValidationError("filters.tags must be a list of strings", field="filters.tags")
    if len(tags) > MAX_TAGS:
        raise ValidationError(f"at most {MAX_TAGS} tags", field="filters.tags")
    for t in tags:  # both reach PostgreSQL, which cannot take a NUL (nor psycopg a lone surrogate)
        check_text(t, "filters.tags")
    meta = raw.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise ValidationError("filters.metadata must be an object", field="filters.metadata")
    if len(json.dumps(meta, default=str)) > 8192:
        raise ValidationError("filters.metadata is too large", field="filters.metadata")
    check_json_text(dict(meta), "filters.metadata")
    tr = raw.get("time_range") or {}
    if not isinstance(tr, Mapping):
        raise ValidationError(
            'filters.time_range must be an object like {"from": ISO, "to": ISO}', field="filters.time_range"
        )
    unknown_tr = set(tr) - set(_FROM_KEYS) - set(_TO_KEYS)
    if unknown_tr:
        raise ValidationError(
            f"unknown time_range key(s): {', '.join(sorted(unknown_tr))} (use from/to)", field="filters.time_range"
        )
    lo = next((tr[k] for k in _FROM_KEYS if tr.get(k) is not None), None)
    hi = next((tr[k] for k in _TO_KEYS if tr.get(k) is not None), None)
    f = SearchFilters(
        tags=tuple(dict.fromkeys(t.strip() for t in tags if t.strip())),
        metadata=dict(meta),
        updated_from=_time(lo, "filters.time_range.from") if lo is not None else None,
        updated_to=_time(hi, "filters.time_range.to") if hi is not None else None,
    )
    if f.updated_from and f.updated_to and f.updated_from > f.updated_to:
        raise ValidationError("filters.time_range.from is after .to", field="filters.time_range")
    return f
