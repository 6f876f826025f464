"""``openkb index verify [--repair]``: compare a collection with PostgreSQL, row by row.

* missing: a current chunk PostgreSQL has and the collection lacks (or a page never chunked);
* extra: a row whose chunk is not current any more (old version, deleted page, purged document);
* stale: a row whose title or access/scalar fields differ from what ``chunk_access`` says now.

``--repair`` re-syncs every document concerned (``service.sync_documents``: chunk if needed,
upsert, partial-update, delete) and deletes rows of documents PostgreSQL no longer has. It reads
every row id of the collection and computes access fields for every page: minutes at a million
chunks, seconds at 100k.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import text
from sqlmodel import Session

from openkb.context import AppContext
from openkb.errors import NotFound
from openkb.indexing import milvus as mv
from openkb.indexing.profiles import (
    audit_index,
    authorize_operator,
    current_target,
    find_by_collection,
    spec_of,
)
from openkb.indexing.service import (
    SCALAR_FIELDS,
    Target,
    _differs,
    flush_collection,
    load_docs,
    milvus_row,
    sync_each,
)
from openkb.models import DocumentChunk
from openkb.permissions import chunk_access_many
from openkb.permissions.principal import Principal

log = logging.getLogger("openkb.indexing.verify")

DOC_BATCH = 2000
_FIELDS = ("id", "document_id", "title", *SCALAR_FIELDS)


def _doc_batches(session: Session) -> Iterator[list[str]]:
    after = "00000000-0000-0000-0000-000000000000"
    while True:
        ids = [
            r[0]
            for r in session.execute(
                text(
                    "SELECT id::text FROM documents WHERE type = 'page' AND id > CAST(:a AS uuid) ORDER BY id LIMIT :n"
                ),
                {"a": after, "n": DOC_BATCH},
            ).all()
        ]
        if not ids:
            return
        yield ids
        after = ids[-1]


def _expected(session: Session, doc_ids: list[str]) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """(chunk id -> expected row, documents that want rows but have no chunks yet) — read-only.

    Trap: an empty page (or one that is only a title) has no chunks *by design*, so "no chunks"
    alone is not "never chunked": it counted as unchunked forever and ``--repair`` could not fix
    it. A page whose current version was synced (``indexed_version_id`` is current) is complete
    with zero rows; only one that was never synced is reported (and ``--repair`` syncs it)."""
    docs = {k: d for k, d in load_docs(session, doc_ids).items() if d.wants_rows}
    if not docs:
        return {}, set()
    from sqlmodel import col, select

    chunks = session.exec(select(DocumentChunk).where(col(DocumentChunk.document_id).in_(list(docs)))).all()
    access = {str(k): v for k, v in chunk_access_many(session, list(docs)).items()}
    out: dict[str, dict[str, Any]] = {}
    have_chunks: set[str] = set()
    for c in chunks:
        d = docs[str(c.document_id)]
        if str(c.version_id) != d.current_version_id:
            continue
        have_chunks.add(d.id)
        out[str(c.id)] = milvus_row(d, c, access.get(d.id))
    return out, {d for d in set(docs) - have_chunks if not docs[d].indexed_current}


def verify(
    ctx: AppContext,
    session: Session,
    principal: Principal,
    *,
    collection: str | None = None,
    repair: bool = False,
    examples: int = 5,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """The report (``ok`` when nothing differs). A repair is audited as ``milvus.index.repair``.
    ``progress(phase, done, total)``, if given, hears ``compare`` per batch of pages and
    ``repair`` (documents) before the re-sync: the admin console's verify job shows it."""
    authorize_operator(session, principal)
    client = ctx.milvus
    collection = collection or current_target(client, ctx.settings.milvus_active_alias)
    if not collection:
        raise NotFound("no active collection (run `openkb up` once, or `openkb index rebuild`)")
    prof = find_by_collection(session, collection)
    if prof is None:
        raise NotFound(f"no index profile describes {collection}")
    flush_collection(ctx, collection)
    have = {r["id"]: r for r in mv.query_rows(client, collection, 'id != ""', output_fields=_FIELDS, limit=None)}
    missing: list[str] = []
    stale: list[str] = []
    unchunked: set[str] = set()
    todo_docs: set[str] = set()
    seen: set[str] = set()
    pages = session.execute(text("SELECT count(*) FROM documents WHERE type = 'page'")).scalar_one() if progress else 0
    checked = 0
    if progress:
        progress("compare", 0, pages)
    for batch in _doc_batches(session):
        want, never = _expected(session, batch)
        unchunked |= never
        todo_docs |= never
        for cid, row in want.items():
            seen.add(cid)
            got = have.get(cid)
            if got is None:
                missing.append(cid)
                todo_docs.add(row["document_id"])
            elif got.get("title") != row["title"] or _differs(got, row):
                stale.append(cid)
                todo_docs.add(row["document_id"])
        if progress:
            checked += len(batch)
            progress("compare", checked, pages)
    extra = [cid for cid in have if cid not in seen]
    extra_docs = {have[c]["document_id"] for c in extra}
    report: dict[str, Any] = {
        "collection": collection,
        "profile": prof.name,
        "milvus_rows": len(have),
        "expected_rows": len(seen),
        "missing": len(missing),
        "extra": len(extra),
        "stale": len(stale),
        "unchunked_documents": len(unchunked),
        "examples": {"missing": missing[:examples], "extra": extra[:examples], "stale": stale[:examples]},
        "ok": not (missing or extra or stale or unchunked),
        "repaired": False,
        "rejected": {},
    }
    if repair and not report["ok"]:
        target = Target(collection, spec_of(prof))
        existing = set(load_docs(session, sorted(extra_docs)).keys()) if extra_docs else set()
        gone_rows = [c for c in extra if have[c]["document_id"] not in existing]
        ids = sorted(todo_docs | (extra_docs & existing))
        # a document Milvus refuses for its data fails alone (``failed``, listed by `openkb index
        # status`); everything else is still repaired (sync_each)
        if progress:
            progress("repair", 0, len(ids))
        rep, rejected = sync_each(ctx, ids, targets=[target])
        report["rejected"] = rejected
        if gone_rows:
            rep["deleted"] += mv.delete_rows(client, collection, gone_rows, flush=False) or len(gone_rows)
            flush_collection(ctx, collection)
        report["repaired"] = True
        report["repair"] = rep
        audit_index(session, principal, "milvus.index.repair", collection=collection, **rep)
    return report
