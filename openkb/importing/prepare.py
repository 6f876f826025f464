"""Pass 1 of an import, one file: read -> sniff -> convert -> repair to the dialect (docs/importing.md).

A module of its own, importing no database code, because it is what the ``--jobs`` worker
processes run (``importing.worker``, a fresh interpreter): it imports this instead of the whole
write path (SQLAlchemy, the models, the permission service), which used to cost each worker more
than the files it prepared in a small import. Trap: keep configuration code off this import path
too (``mineru`` reads the settings only when a PDF is converted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openkb.errors import OpenKBError
from openkb.importing.links import WIKI, marker
from openkb.importing.mineru import choose  # converters.choose + OPENKB_PDF_CONVERTER
from openkb.importing.repair import import_markdown
from openkb.importing.sniff import sniff

__all__ = ["Prepared", "prepare_bytes", "prepare_many"]


@dataclass
class Prepared:
    """Pass 1's result for one file (picklable: it crosses process boundaries)."""

    rel: str
    size: int
    kind: str = ""
    mime: str = ""
    converter: str | None = None
    markdown: str | None = None
    title: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    assets: list[tuple[str, bytes, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    confidence: float = 1.0
    refs: list[tuple[str, bool]] = field(default_factory=list)  # placeholder order (links.mark)
    wiki: list[str] = field(default_factory=list)  # [[targets]], lower-cased
    error: str | None = None
    code: str | None = None
    source: bytes | None = None  # the original, kept as the page's source asset (non-Markdown)


def prepare_bytes(
    rel: str, data: bytes, *, convert_images: bool = False, nonce: str = "", max_chars: int | None = None
) -> Prepared:
    """Sniff, convert and repair one file; its references become placeholders (``links.mark``)
    the write fills in. Never raises: a failure is in ``error``/``code``.

    ``max_chars`` (the page limit, ``max_markdown_chars``) refuses a file whose converted text is
    longer before the repair, which is the costly step (~300 KB/s: a 50 MB file, which the upload
    limit allows, would hold a worker for minutes only to be refused by the write)."""
    p = Prepared(rel, len(data))
    try:
        s = sniff(data, rel)
        p.kind, p.mime = s.kind, s.mime
        if s.kind == "image" and not convert_images:
            return p  # decided later: an asset of the pages that use it, or a page of its own
        conv = choose(s)
        out = conv.convert(data, rel)
        p.converter = conv.name
        if max_chars is not None and len(out.markdown) > max_chars:
            p.error, p.code = (
                f"the converted Markdown has {len(out.markdown)} characters; a page holds at most "
                f"{max_chars} (max_markdown_chars): split the file",
                "MARKDOWN_TOO_LARGE",
            )
            return p
        wiki: list[str] = []
        edit, refs = marker(nonce, wiki)  # the references become placeholders in the same parse
        rep = import_markdown(out.markdown, edit=edit)
        p.markdown = rep.markdown
        p.title = rep.title or out.title
        p.tags = rep.tags
        p.metadata = rep.metadata
        p.warnings = out.warnings + rep.warnings
        p.confidence = out.confidence
        p.assets = [(a.name, a.data, a.mime) for a in out.assets]
        p.refs = list(refs)
        # as the write's parse sees them: a ![[x]] in a code span is no embed
        p.wiki = [m.group(2).strip().lower() for w in wiki if (m := WIKI.match(w))]
        if s.kind not in ("markdown", "text", "empty", "image"):
            p.source = data
    except OpenKBError as exc:
        p.error, p.code = exc.detail, exc.code
    except RecursionError:  # an HTML or Office file nested past what its converter walks
        p.error, p.code = (
            "nested too deeply to convert (elements inside elements, hundreds of levels)",
            "CONVERSION_FAILED",
        )
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop the batch
        p.error, p.code = f"{type(exc).__name__}: {str(exc)[:300]}", "CONVERSION_FAILED"
    return p


def prepare_many(items: list[tuple[str, bytes]], nonce: str, max_chars: int | None = None) -> list[Prepared]:
    """Several files in one call: a worker task per few files, not per file (less pickling)."""
    return [prepare_bytes(rel, data, nonce=nonce, max_chars=max_chars) for rel, data in items]
