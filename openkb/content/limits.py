"""Hard size limits on every content write, each with its own stable error code.

The limits come from ``Settings`` (docs: body 5,000,000 characters, titles and names 1,000,
metadata 64 KB as compact UTF-8 JSON, folder depth 10, upload size). They are checked in the
services, not in request schemas, so REST, MCP, imports and integrations refuse the same input
with the same code, and a violation is never a 500.

Trap: PostgreSQL ``text``/``jsonb`` cannot hold NUL characters and psycopg cannot encode lone
surrogates; both would surface as a driver error (500) if they got that far, so every string a
write stores goes through :func:`check_text` first.
"""

from __future__ import annotations

import json
import re
from typing import Any

from openkb.config import Settings, get_settings
from openkb.errors import (
    FolderDepthExceeded,
    MarkdownTooLarge,
    MetadataTooLarge,
    NameTooLong,
    TitleTooLong,
    TooManyTags,
    UploadTooLarge,
    ValidationError,
    ValueOutOfRange,
)

MAX_TAGS = 256

# A title is one line (docs/api.md#body-limits): line and paragraph separators, with the spaces
# around them, become one space, so a title pasted from a multi-line source reads as typed.
_LINE_BREAKS = re.compile(r"\s*[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]\s*")


def _settings(settings: Settings | None) -> Settings:
    return settings or get_settings()


def check_text(value: str, field: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string", field=field)
    if "\x00" in value:
        raise ValidationError(f"{field} must not contain NUL characters", field=field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{field} is not valid Unicode (lone surrogate)", field=field) from None
    return value


def check_title(title: str, field: str = "title", settings: Settings | None = None) -> str:
    """Strip, join its lines, require non-empty, enforce ``max_title_chars``."""
    check_text(title, field)
    t = _LINE_BREAKS.sub(" ", title.strip())
    limit = _settings(settings).max_title_chars
    if len(t) > limit:
        raise TitleTooLong(
            f"{field} has {len(t)} characters; at most {limit} are allowed",
            field=field,
            limit="max_title_chars",
            max=limit,
            actual=len(t),
        )
    if not t:
        raise ValidationError(f"{field} must not be empty", field=field)
    return t


def check_name(name: str, field: str = "name", settings: Settings | None = None, *, allow_empty: bool = False) -> str:
    check_text(name, field)
    n = name.strip()
    limit = _settings(settings).max_name_chars
    if len(n) > limit:
        raise NameTooLong(
            f"{field} has {len(n)} characters; at most {limit} are allowed",
            field=field,
            limit="max_name_chars",
            max=limit,
            actual=len(n),
        )
    if not n and not allow_empty:
        raise ValidationError(f"{field} must not be empty", field=field)
    return n


def check_markdown(markdown: str, field: str = "markdown", settings: Settings | None = None) -> str:
    check_text(markdown, field)
    limit = _settings(settings).max_markdown_chars
    if len(markdown) > limit:
        raise MarkdownTooLarge(
            f"{field} has {len(markdown)} characters; at most {limit} are allowed",
            field=field,
            limit="max_markdown_chars",
            max=limit,
            actual=len(markdown),
        )
    return markdown


def check_json_text(value: Any, field: str) -> None:
    """Every string of a JSON value (object keys included, at any depth) through ``check_text``:
    jsonb refuses ``\\u0000`` and psycopg cannot encode a lone surrogate."""
    if isinstance(value, str):
        check_text(value, field)
    elif isinstance(value, dict):
        for k, v in value.items():
            check_text(str(k), field)
            check_json_text(v, field)
    elif isinstance(value, (list, tuple)):
        for v in value:
            check_json_text(v, field)


_INT64 = (-(2**63), 2**63 - 1)


def _int64(value: Any, field: str, depth: int = 0) -> None:
    """Integers the search index can store: Milvus' JSON keeps signed 64-bit integers only, so
    ``{"n": 10**40}`` was accepted, then failed indexing for ever (docs/retrieval.md#indexing).
    An integral float past that range (``5.97e24``) is one too: PostgreSQL's jsonb keeps it as
    the number 5970000000000000000000000 and gives it back as an integer, so it was accepted
    once, then refused at every later save and at the import of an export (docs/api.md#body-limits)."""
    if isinstance(value, bool):
        return
    if isinstance(value, float) and value.is_integer() and not _INT64[0] <= value <= _INT64[1]:
        raise ValueOutOfRange(
            f"{field} holds the number {value!r}, a whole number outside the signed 64-bit range the index "
            "stores; send it as a string",
            field=field,
        )
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise ValueOutOfRange(
                f"{field} holds the integer {str(value)[:40]}, outside the signed 64-bit range the index stores; "
                "send it as a string",
                field=field,
            )
    elif isinstance(value, dict) and depth < 200:
        for v in value.values():
            _int64(v, field, depth + 1)
    elif isinstance(value, list) and depth < 200:
        for v in value:
            _int64(v, field, depth + 1)


def check_metadata(meta: Any, field: str = "metadata", settings: Settings | None = None) -> dict[str, Any]:
    """A JSON object whose compact UTF-8 serialization is at most ``max_metadata_bytes``."""
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise ValidationError(f"{field} must be a JSON object", field=field)
    check_json_text(meta, field)
    _int64(meta, field)
    try:
        size = len(json.dumps(meta, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8"))
    except (TypeError, ValueError):
        raise ValidationError(f"{field} must be plain JSON (no NaN/Infinity)", field=field) from None
    limit = _settings(settings).max_metadata_bytes
    if size > limit:
        raise MetadataTooLarge(
            f"{field} is {size} bytes as JSON; at most {limit} are allowed",
            field=field,
            limit="max_metadata_bytes",
            max=limit,
            actual=size,
        )
    return meta


def check_tags(tags: Any, settings: Settings | None = None) -> list[str]:
    if tags is None:
        return []
    if not isinstance(tags, list):
        raise ValidationError("tags must be a list of strings", field="tags")
    # duplicates dropped in order, by a dict: a list's ``in`` made a body of 40,000 distinct tags
    # (still under the body limit) take 10 s of a server thread before this refused it
    out = list(dict.fromkeys(check_name(t, "tags", settings) for t in tags))
    if len(out) > MAX_TAGS:
        raise TooManyTags(
            f"{len(out)} tags; at most {MAX_TAGS} are allowed",
            field="tags",
            limit="max_tags",
            max=MAX_TAGS,
            actual=len(out),
        )
    return out


def check_depth(depth: int, settings: Settings | None = None) -> None:
    """``depth`` counts levels: a document at the knowledge-base root has depth 1."""
    limit = _settings(settings).max_folder_depth
    if depth > limit:
        raise FolderDepthExceeded(
            f"the tree would be {depth} levels deep; at most {limit} are allowed",
            limit="max_folder_depth",
            max=limit,
            actual=depth,
        )


def check_upload_size(size: int, settings: Settings | None = None) -> None:
    limit = _settings(settings).max_upload_bytes
    if size > limit:
        raise UploadTooLarge(f"the upload is larger than {limit} bytes", limit="max_upload_bytes", max=limit)
