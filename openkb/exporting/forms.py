"""A version's *export form*: what an export needs of its body, computed once when the version
is written (docs/export.md#speed).

A version never changes, yet every export of it used to find its internal references (a scan
with context checks, ~100 µs for a 3 KB page) and deflate it (~60 µs): as much CPU again as
reading the page. The form keeps both results:

* ``refs``: each ``openkb://document/<id>`` / ``asset://<id>`` as (start, end, plain) byte
  offsets in the UTF-8 body, flat (``links.scan_refs``; plain ones can be replaced by text),
  and ``keys``: each one's scheme letter and id, lower case (``d<id>`` / ``a<id>``), so an
  export finds the references that point into it with one set operation per page;
* ``deflated``: the body as raw deflate, non-final, byte-aligned at both ends: the text between
  plain references deflated piece by piece (each piece alone, ended by a sync flush), each plain
  reference's destination as a *stored* block in between; ``blocks``: where each of those stored
  blocks starts and ends in ``deflated`` (flat pairs, one per plain reference);
* ``body`` (stored in the row, not part of ``ExportForm``): the body itself, UTF-8, so an export
  reads the form's row alone. Reading the version's Markdown beside it cost PostgreSQL a second
  index lookup, a TOAST fetch and a decompression per page, twice what the rest of the row
  costs; the form's row is kept uncompressed and in line (migration 0014), a copy of each
  current body the price (old versions have no form).

An export then writes a page member as its front matter (a stored block), the form's
``deflated`` — with the stored block of each reference it rewrites swapped for one holding the
new destination — and an empty final block. Deflate blocks concatenate when each starts
byte-aligned and none is marked final; each piece was compressed alone, so no match reaches
into a block that may be swapped. A page none of whose references point into the export (most
references, in most exports) costs a dictionary lookup per reference and two joins. CRC-32 and
SHA-256 are still taken over the file's real bytes (cheap, and what the manifest promises).

Trap: ``body`` must be the version's Markdown exactly, as the other fields are computed from it:
every row is written by the functions here, from the same string (versions never change).

Trap: the bytes a form gives depend on zlib's deflate; a form is computed once and then
reused, so a re-export is byte-identical even across a zlib upgrade, and a version that lacks
its form (written before migration 0012 by a path that skipped it, or a form of another
``FORM``) gets one computed on the fly by this same function: the same zip either way.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from typing import Any, NamedTuple

from sqlalchemy import Connection, insert, text
from sqlalchemy.orm import Session

from openkb.exporting.links import scan_refs
from openkb.models import DocumentExportForm

__all__ = [
    "FORM",
    "ExportForm",
    "backfill_forms",
    "export_form_row",
    "form_values",
    "make_form",
    "store_forms",
    "stored_blocks",
]

FORM = 1  # the form's layout and algorithm; a stored form of another number is recomputed
LEVEL = 6  # computed once per version: zlib's default level, not the export's fastest
_STORED = struct.Struct("<BHH")
_MAX_STORED = 0xFFFF


class ExportForm(NamedTuple):
    """A named tuple: an export makes one per page (in its reader thread), and a frozen
    dataclass's ``__init__`` cost three times as much."""

    refs: list[int]  # flat (start, end, plain 0/1), byte offsets into the UTF-8 body
    keys: list[str]  # per reference: "d" or "a" (document, asset) + its id in lower case
    blocks: list[int]  # flat (start, end) in ``deflated`` of each plain reference's stored block
    deflated: bytes


def make_form(markdown: str) -> ExportForm:
    """The export form of a body (deterministic: the same body, the same form)."""
    refs = scan_refs(markdown)
    keys = [
        ("d" + markdown[s + 18 : s + 54] if markdown.startswith("o", s) else "a" + markdown[s + 8 : s + 44]).lower()
        for s, _e, _p in refs
    ]
    data = markdown.encode()
    flat: list[int] = []
    if markdown.isascii():
        for start, end, plain in refs:
            flat += (start, end, int(plain))
    else:  # character offsets to byte offsets, one pass
        at_char = at_byte = 0
        for start, end, plain in refs:
            at_byte += len(markdown[at_char:start].encode())
            b_start = at_byte
            at_byte += len(markdown[start:end].encode())
            at_char = end
            flat += (b_start, at_byte, int(plain))
    blocks: list[int] = []
    out: list[bytes] = []
    size = pos = 0
    for k in range(0, len(flat), 3):
        if flat[k + 2]:
            piece = _deflate_piece(data[pos : flat[k]])
            ref = stored_blocks(data[flat[k] : flat[k + 1]])
            out += (piece, ref)
            size += len(piece)
            blocks += (size, size + len(ref))
            size += len(ref)
            pos = flat[k + 1]
    out.append(_deflate_piece(data[pos:]))
    return ExportForm(flat, keys, blocks, b"".join(out))


def _deflate_piece(data: bytes) -> bytes:
    if not data:
        return b""
    c = zlib.compressobj(LEVEL, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)


def stored_blocks(data: bytes) -> bytes:
    """``data`` as non-final stored deflate blocks (byte-aligned in, byte-aligned out)."""
    n = len(data)
    if n <= _MAX_STORED:
        return _STORED.pack(0, n, n ^ 0xFFFF) + data if n else b""
    return b"".join(
        _STORED.pack(0, len(c), len(c) ^ 0xFFFF) + c
        for c in (data[i : i + _MAX_STORED] for i in range(0, n, _MAX_STORED))
    )


def form_values(version_id: uuid.UUID, markdown: str) -> dict[str, Any]:
    """The columns of a version's form row, every writer's one source (the bytes of a form
    depend only on the body: see the module's traps)."""
    f = make_form(markdown)
    return {
        "version_id": version_id,
        "form": FORM,
        "refs": f.refs,
        "keys": f.keys,
        "blocks": f.blocks,
        "deflated": f.deflated,
        "body": markdown.encode(),
    }


def export_form_row(version_id: uuid.UUID, markdown: str) -> DocumentExportForm:
    """The row to store with a new version (the version write paths call this)."""
    return DocumentExportForm(**form_values(version_id, markdown))


def store_forms(session: Session, versions: list[tuple[uuid.UUID, str]]) -> None:
    """Store the forms of many new versions (``(id, markdown)``, already flushed) in one
    statement: what a batch write (an import's ``KeyedBatch``) does. Plain rows, not ORM objects:
    nothing reads them back in the unit of work, and the unit of work's bookkeeping for a
    thousand of them cost about as much CPU as computing half the forms."""
    rows = [form_values(vid, markdown) for vid, markdown in versions]
    if rows:
        session.execute(insert(DocumentExportForm.__table__), rows)


_MISSING_SQL = text(
    "SELECT v.id, v.markdown FROM documents d JOIN document_versions v ON v.id = d.current_version_id "
    "LEFT JOIN document_export_forms f ON f.version_id = v.id "
    "WHERE (f.version_id IS NULL OR f.form <> :form) AND v.id > CAST(:after AS uuid) ORDER BY v.id LIMIT :n"
)
_UPSERT = (
    "INSERT INTO document_export_forms (version_id, form, refs, keys, blocks, deflated{body}) "
    "VALUES (:version_id, :form, CAST(:refs AS integer[]), CAST(:keys AS text[]), CAST(:blocks AS integer[]), :deflated{value}) "
    "ON CONFLICT (version_id) DO UPDATE SET form = EXCLUDED.form, refs = EXCLUDED.refs, keys = EXCLUDED.keys, "
    "blocks = EXCLUDED.blocks, deflated = EXCLUDED.deflated{update}"
)
_UPSERT_SQL = text(_UPSERT.format(body=", body", value=", :body", update=", body = EXCLUDED.body"))
_UPSERT_0012_SQL = text(_UPSERT.format(body="", value="", update=""))  # the table as migration 0012 made it


def backfill_forms(conn: Connection, batch: int = 500, *, body: bool = True) -> int:
    """Store the form of every page's current version that lacks one (or has one of another
    ``FORM``), ``batch`` versions per statement; returns how many. Migration 0012 runs it for
    the versions written before forms existed (``body=False``: its table has no ``body`` yet;
    0014 adds and fills it); safe to run again (it finds nothing to do). Older versions are
    left alone: an export reads current versions only."""
    done = 0
    after = "00000000-0000-0000-0000-000000000000"
    while True:
        rows = conn.execute(_MISSING_SQL, {"form": FORM, "after": after, "n": batch}).all()
        if not rows:
            return done
        values = [form_values(vid, markdown) for vid, markdown in rows]
        if not body:
            for v in values:
                del v["body"]
        conn.execute(_UPSERT_SQL if body else _UPSERT_0012_SQL, values)
        done += len(rows)
        after = str(rows[-1][0])
