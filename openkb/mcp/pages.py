"""Opaque cursors for the MCP list tools (docs/mcp.md#pagination).

A cursor is base64url JSON naming the tool, the offset of the next item and a digest of the
arguments it was issued for, so a cursor replayed with other arguments (another knowledge base,
another parent) is refused instead of silently paging the wrong list. It is not signed: it grants
nothing, because every page re-runs the permission-checked listing and only slices it. Trap: the
offset indexes a listing taken again on each call, so an item added or removed meanwhile shifts
the pages by one (the same as any offset paging); no item becomes visible that the caller may not
read. A listing too long to load on every call pages in the database instead (``page_of``:
``OFFSET``/``LIMIT`` and an exact count), with the same cursors.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from openkb.errors import ValidationError

T = TypeVar("T")
MAX_OFFSET = 2_147_483_647  # no list is longer; a crafted cursor past it is refused, not sent to SQL


def _digest(tool: str, args: dict[str, Any]) -> str:
    raw = json.dumps([tool, args], sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()[:12]


def encode(tool: str, args: dict[str, Any], offset: int) -> str:
    raw = json.dumps({"t": tool, "o": offset, "h": _digest(tool, args)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode(tool: str, args: dict[str, Any], cursor: str | None) -> int:
    """The offset a cursor points at (0 without one)."""
    if not cursor:
        return 0
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset = int(raw["o"])
        ok = raw["t"] == tool and raw["h"] == _digest(tool, args) and 0 <= offset <= MAX_OFFSET
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise ValidationError(
            "cursor is not one this tool returned for these arguments; start again without a cursor", field="cursor"
        )
    return offset


@dataclass(frozen=True)
class Page:
    items: list[Any]
    next_cursor: str | None
    total: int


def page(items: Sequence[T], *, tool: str, args: dict[str, Any], cursor: str | None, limit: int) -> Page:
    start = decode(tool, args, cursor)
    chunk = list(items[start : start + limit])
    end = start + len(chunk)
    return Page(chunk, encode(tool, args, end) if end < len(items) else None, len(items))


def page_of(
    fetch: Callable[[int, int], tuple[Sequence[T], int]],
    *,
    tool: str,
    args: dict[str, Any],
    cursor: str | None,
    limit: int,
) -> Page:
    """``page`` for a listing the database pages itself: ``fetch(offset, limit)`` returns one
    page and the exact total (for a list too long to load whole, or capped when loaded whole)."""
    start = decode(tool, args, cursor)
    items, total = fetch(start, limit)
    end = start + len(items)
    return Page(list(items), encode(tool, args, end) if end < total else None, total)


def check_limit(limit: int | None, default: int, maximum: int) -> int:
    if limit is None:
        return default
    if limit < 1 or limit > maximum:
        raise ValidationError(f"limit must be between 1 and {maximum}", field="limit")
    return limit
