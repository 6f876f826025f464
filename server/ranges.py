"""Byte ranges and validators of asset reads (docs/api.md#assets).

An asset never changes (a new upload is a new asset), so its SHA-256 is a strong validator: the
``ETag`` of every read. With it a browser revalidates a cached image with ``If-None-Match`` and
gets ``304`` (after the permission check, which every read passes first), and a video or PDF
viewer asks for the part it needs with ``Range`` (one range: ``206``) and resumes with
``If-Range``. What the rules follow is RFC 9110 §13-14: a ``Range`` this server does not serve
(several ranges, another unit, bad syntax) is ignored and the whole asset sent, which the RFC
allows; a range that starts past the end is ``416``.
"""

from __future__ import annotations

import re

from openkb.errors import RangeNotSatisfiable

_RANGE = re.compile(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", re.IGNORECASE)
_BIG = 10**18  # past any asset; a longer number is not converted (Python refuses past 4,300 digits)


def _num(digits: str) -> int:
    return int(digits) if len(digits) <= 18 else _BIG


def etag_of(sha256: str) -> str:
    return f'"{sha256}"'


def not_modified(if_none_match: str | None, etag: str) -> bool:
    """Whether ``If-None-Match`` names ``etag`` (weak comparison, as RFC 9110 §13.1.2 says)."""
    if not if_none_match:
        return False
    for tag in if_none_match.split(","):
        tag = tag.strip()
        if tag == "*" or tag.removeprefix("W/") == etag:
            return True
    return False


def byte_range(header: str | None, size: int, *, if_range: str | None = None, etag: str = "") -> tuple[int, int] | None:
    """``(first, last)`` (inclusive) of the one range asked for, or None for the whole asset.

    None also when ``If-Range`` is not this asset's strong ``etag`` (the client's copy is of
    something else: it gets the whole), and for an empty asset (nothing to take a part of).
    Raises :class:`RangeNotSatisfiable` for a range that starts at or past ``size``, or a suffix
    of zero bytes."""
    if not header or size <= 0:
        return None
    if if_range is not None and if_range.strip() != etag:
        return None
    m = _RANGE.fullmatch(header)
    if m is None:  # several ranges, another unit, bad syntax
        return None
    first, last = m.group(1), m.group(2)
    if not first and not last:
        return None
    if not first:  # bytes=-N: the last N bytes
        n = _num(last)
        if n == 0:
            raise RangeNotSatisfiable(f"the range asks for the last 0 bytes of {size}", size=size)
        return max(0, size - n), size - 1
    start = _num(first)
    if last and _num(last) < start:  # invalid syntax (RFC 9110 §14.1.1): ignored
        return None
    end = _num(last) if last else size - 1
    if start >= size:
        raise RangeNotSatisfiable(f"the range starts past the end of the asset ({size} bytes)", size=size)
    return start, min(end, size - 1)
