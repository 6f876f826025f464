"""Assets: uploaded images and attachments in the blob store, read only after a permission check.

Markdown refers to them as ``asset://<id>`` (docs/markdown.md#accepted-constructs). An asset attached to a document is
readable exactly when the document is (``can_read_document``, any principal: user, anonymous,
share-link visitor); an unattached upload (e.g. an import source) only by its uploader. The blob
store knows nothing about callers, so every read goes through :func:`access_asset` first.

Served safely: only a short list of types is shown inline; everything else (HTML, SVG, ...) is
sent as an attachment, so an uploaded page cannot run script in the app's origin.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, BinaryIO

from sqlalchemy import text
from sqlmodel import Session

from openkb.config import Settings
from openkb.content import limits
from openkb.content.actor import Actor
from openkb.content.changes import record_change
from openkb.db import after_commit, after_rollback
from openkb.errors import NotFound, PermissionDenied
from openkb.models import Document, DocumentAsset
from openkb.models._base import utcnow
from openkb.permissions import Action, Principal, access_document, can_read_document
from openkb.storage import BlobStore

INLINE_TYPES = frozenset(
    {
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "image/avif",
        "application/pdf",
        "text/plain",
        "audio/mpeg",
        "audio/ogg",
        "video/mp4",
        "video/webm",
    }
)
_MIME = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$")


def clean_mime(value: str | None) -> str:
    v = (value or "").split(";", 1)[0].strip().lower()
    return v if _MIME.match(v) else "application/octet-stream"


def clean_filename(name: str | None) -> str | None:
    if not name:
        return None
    base = re.split(r"[\\/]", name)[-1]
    base = "".join(ch for ch in base if unicodedata.category(ch)[0] != "C").strip()
    try:
        base.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return base[:255] or None


def asset_out(a: DocumentAsset) -> dict[str, Any]:
    return {
        "id": a.id,
        "document_id": a.document_id,
        "filename": a.filename,
        "mime_type": a.mime_type,
        "size_bytes": a.size_bytes,
        "sha256": a.sha256,
        "ref": f"asset://{a.id}",
        "url": f"/api/assets/{a.id}",
        "created_by": a.created_by,
        "created_at": a.created_at,
    }


def upload_asset(
    session: Session,
    actor: Actor,
    blobs: BlobStore,
    data: BinaryIO,
    *,
    size: int | None,
    filename: str | None,
    content_type: str | None,
    document_id: uuid.UUID | None = None,
    settings: Settings | None = None,
    flush: bool = True,
) -> DocumentAsset:
    """Store an upload; with ``document_id`` the caller must be able to edit that document. The
    blob is removed again if the transaction that records it rolls back. ``flush=False``: the
    rows are written with the caller's next flush (an import writes a batch of pages at once)."""
    if size is not None:
        limits.check_upload_size(size, settings)
    doc: Document | None = None
    if document_id is not None:
        doc = access_document(session, actor.principal, document_id, Action.EDIT).document
    elif not actor.principal.has_write_scope():
        raise PermissionDenied("this token may not upload (it needs doc:write)")
    asset_id = uuid.uuid4()
    fresh = f"tenant/{actor.tenant_id}/{asset_id}"
    stored, digest = blobs.put(fresh, data, clean_mime(content_type))
    try:
        limits.check_upload_size(stored, settings)
    except limits.UploadTooLarge:
        blobs.delete(fresh)
        raise
    key = _stored_copy(session, blobs, actor.tenant_id, digest, stored)
    if key is not None:
        blobs.delete(fresh)  # the same bytes are stored already: one blob, one more row
    else:
        key = fresh
        # The bytes are in the store before the row is: if this transaction does not commit (a
        # later statement fails, the commit itself fails), nothing would ever point at them again.
        after_rollback(session, lambda: blobs.delete(fresh))
        _remember(session, (actor.tenant_id, digest, stored), key)
    a = DocumentAsset(
        id=asset_id,
        tenant_id=actor.tenant_id,
        document_id=doc.id if doc else None,
        detached_at=None if doc else utcnow(),  # never attached: kept ASSET_RETENTION_DAYS (prune_detached)
        object_key=key,
        filename=clean_filename(filename),
        mime_type=clean_mime(content_type),
        size_bytes=stored,
        sha256=digest,
        created_by=actor.user_id,
    )
    session.add(a)
    if flush:
        session.flush()
    scope = {"knowledge_base_id": doc.knowledge_base_id, "workspace_id": doc.workspace_id} if doc else {}
    record_change(
        session,
        actor,
        op="asset.create",
        object_type="asset",
        object_id=a.id,
        summary=f"uploaded {a.filename or a.mime_type} ({stored} bytes)",
        scope=scope,
        before={},
        after={"document_id": a.document_id, "filename": a.filename, "size_bytes": stored},
        flush=flush,
    )
    return a


def access_asset(session: Session, principal: Principal, asset_id: uuid.UUID) -> DocumentAsset:
    """The asset if the caller may read it; 404 otherwise (existence stays private)."""
    a = session.get(DocumentAsset, asset_id)
    if a is None:
        raise NotFound("asset not found")
    if a.document_id is not None:
        if not can_read_document(session, principal, a.document_id):
            raise NotFound("asset not found")
        return a
    if principal.kind != "user" or principal.user_id != a.created_by or principal.tenant_id != a.tenant_id:
        raise NotFound("asset not found")
    return a


def delete_asset(session: Session, actor: Actor, blobs: BlobStore, asset_id: uuid.UUID, *, reverts: Any = None) -> None:
    """Delete an upload (editors of its document, or its uploader when unattached); the blob goes
    after commit when no other row shares it. Not revertible: the bytes are gone."""
    a = access_asset(session, actor.principal, asset_id)
    if a.document_id is not None:
        access_document(session, actor.principal, a.document_id, Action.EDIT)
    elif actor.principal.user_id != a.created_by:
        raise NotFound("asset not found")
    doc = session.get(Document, a.document_id) if a.document_id else None
    scope = {"knowledge_base_id": doc.knowledge_base_id, "workspace_id": doc.workspace_id} if doc else {}
    record_change(
        session,
        actor,
        op="asset.delete",
        object_type="asset",
        object_id=a.id,
        summary=f"deleted {a.filename or a.mime_type}",
        scope=scope,
        before={"document_id": a.document_id, "filename": a.filename},
        after={},
        reverts=reverts,
    )
    _delete_rows(session, blobs, [a.id], [a.object_key])


def _delete_rows(session: Session, blobs: BlobStore, ids: list[uuid.UUID], keys: list[str]) -> list[str]:
    """Delete these asset rows (``keys``: their blobs), and after the commit each of their blobs
    no other row shares; returns those blobs' keys. Every row sharing one
    of the blobs is locked first: two deletes of its last two rows then run one after the other,
    and the second sees it is the last (else each would see the other and the blob would outlive
    both); an upload reusing a blob holds its row FOR SHARE (``_stored_copy``)."""
    keys = sorted(set(keys))
    session.execute(_LOCK_SHARERS, {"k": keys}).all()
    kept = {k for (k,) in session.execute(_OTHER_SHARERS, {"k": keys, "ids": ids}).all()}
    gone = [k for k in keys if k not in kept]
    session.execute(text("DELETE FROM document_assets WHERE id = ANY(:ids)"), {"ids": ids})
    dropped = set(ids)
    for obj in [o for o in session.identity_map.values() if isinstance(o, DocumentAsset) and o.id in dropped]:
        session.expunge(obj)
    if gone:
        after_commit(session, lambda: [blobs.delete(k) for k in gone])
    return gone


def disposition(a: DocumentAsset, download: bool = False) -> tuple[str, str]:
    """(Content-Type, Content-Disposition) that cannot turn an upload into active content."""
    from urllib.parse import quote

    inline = a.mime_type in INLINE_TYPES and not download
    ctype = (
        a.mime_type
        if inline
        else (
            "application/octet-stream"
            if a.mime_type.startswith(("text/html", "image/svg")) or "xml" in a.mime_type or "javascript" in a.mime_type
            else a.mime_type
        )
    )
    name = a.filename or str(a.id)
    return ctype, f"{'inline' if inline else 'attachment'}; filename*=UTF-8''{quote(name)}"


# -- one blob for the same bytes (docs/data-model.md#assets) -----------------------------------
# An upload whose bytes a row of the same tenant already stores shares that row's blob: a folder
# of pages showing one logo, or an export imported back (each page that shows an image gets its
# own row, readable with its page), keeps one copy. A blob goes when its last row goes
# (delete_asset). Only within a tenant: tenants share nothing.

_SAME_BYTES = "openkb_blob_by_content"  # session.info: (tenant, sha256, size) -> key, this transaction's uploads
_COPY = text(
    "SELECT object_key FROM document_assets WHERE tenant_id = :t AND sha256 = :h AND size_bytes = :n "
    "ORDER BY created_at, id LIMIT 1 FOR SHARE"
)
_LOCK_SHARERS = text("SELECT id FROM document_assets WHERE object_key = ANY(:k) ORDER BY id FOR UPDATE")
_SHARER = text("SELECT 1 FROM document_assets WHERE object_key = :k LIMIT 1")
_OTHER_SHARERS = text(
    "SELECT DISTINCT object_key FROM document_assets WHERE object_key = ANY(:k) AND NOT id = ANY(:ids)"
)


def _stored_copy(session: Session, blobs: BlobStore, tenant_id: uuid.UUID, digest: str, size: int) -> str | None:
    """The key of a blob of this tenant holding these bytes, or None.

    This transaction's own uploads first (an import writes a batch of rows with one flush, after
    its uploads), then the committed rows: the one found is locked ``FOR SHARE`` until this
    transaction ends, so it cannot be deleted (and its blob with it) before the new row that
    shares it is committed. A row whose blob is gone (a restore without the blob store) is not
    shared: the upload keeps its own."""
    key = session.info.get(_SAME_BYTES, {}).get((tenant_id, digest, size))
    if key is not None:
        return key
    with session.no_autoflush:
        row = session.execute(_COPY, {"t": tenant_id, "h": digest, "n": size}).first()
    if row is None or not blobs.exists(row[0]):
        return None
    return row[0]


def _remember(session: Session, content: tuple[uuid.UUID, str, int], key: str) -> None:
    """This transaction's new blob, for its later uploads of the same bytes; forgotten when the
    transaction ends (committed rows are found by query; a rolled-back blob is gone)."""
    seen = session.info.get(_SAME_BYTES)
    if seen is None:
        seen = session.info[_SAME_BYTES] = {}
        after_commit(session, lambda: session.info.pop(_SAME_BYTES, None))
        after_rollback(session, lambda: session.info.pop(_SAME_BYTES, None))
    seen[content] = key


# -- merging the copies written before blobs were shared -------------------------------------------

_COPIES = text(
    "SELECT tenant_id, sha256, size_bytes, count(DISTINCT object_key) FROM document_assets "
    "WHERE sha256 IS NOT NULL GROUP BY tenant_id, sha256, size_bytes HAVING count(DISTINCT object_key) > 1 "
    "ORDER BY tenant_id, sha256, size_bytes"
)
_GROUP = text(
    "SELECT id, object_key FROM document_assets WHERE tenant_id = :t AND sha256 = :h AND size_bytes = :n "
    "ORDER BY created_at, id FOR UPDATE"
)
_POINT = text(
    "UPDATE document_assets SET object_key = :keep WHERE tenant_id = :t AND sha256 = :h AND size_bytes = :n "
    "AND object_key <> :keep"
)


def _holds(blobs: BlobStore, key: str, digest: str, size: int) -> bool:
    """Whether the blob under ``key`` is there and holds exactly these bytes (read whole: a blob
    every row of the group will point at must be the right one)."""
    h, n = hashlib.sha256(), 0
    try:
        for chunk in blobs.open(key):
            h.update(chunk)
            n += len(chunk)
    except NotFound:
        return False
    return n == size and h.hexdigest() == digest


def merge_copies(
    units: Callable[[], AbstractContextManager[Session]],
    blobs: BlobStore,
    *,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Point the rows of each tenant that hold the same bytes at one blob and delete the other
    copies: the blobs uploads wrote before they were shared (migration 0015,
    docs/data-model.md#assets). An operator's maintenance step (``openkb assets dedupe``).

    One transaction per group of rows with the same bytes, whose rows are locked first (an upload
    sharing one of them, or a delete, waits); the blob kept is the oldest row's whose bytes check
    out (read and hashed), else the next one's; a group with no intact copy is left as it is and
    counted. Copies are deleted after the commit, each only if no row points at it any more.
    Safe to re-run: a second run finds nothing to merge. ``dry_run``: count, change nothing."""
    with units() as s:
        groups = s.execute(_COPIES).all()
    out = {"groups": len(groups), "rows": 0, "blobs_removed": 0, "bytes_freed": 0, "groups_without_intact_copy": 0}
    for i, (tenant_id, digest, size, _n) in enumerate(groups, 1):
        gone: list[str] = []
        with units() as s:
            rows = s.execute(_GROUP, {"t": tenant_id, "h": digest, "n": size}).all()
            keys = list(dict.fromkeys(key for _id, key in rows))  # distinct, oldest row's first
            keep = next((k for k in keys if _holds(blobs, k, digest, size)), None)
            if keep is None:
                out["groups_without_intact_copy"] += 1
            else:
                gone = [k for k in keys if k != keep]
                out["rows"] += sum(1 for _id, key in rows if key != keep)
                out["blobs_removed"] += len(gone)
                out["bytes_freed"] += size * len(gone)
                if not dry_run:
                    s.execute(_POINT, {"keep": keep, "t": tenant_id, "h": digest, "n": size})
        if not dry_run:
            for key in gone:
                with units() as s:
                    if s.execute(_SHARER, {"k": key}).first() is None:
                        blobs.delete(key)
        if progress is not None:
            progress(i, len(groups))
    if out["blobs_removed"] and not dry_run:
        _audit_maintenance(units, "assets.copies_merged", out)
    return out


def _audit_maintenance(units: Callable[[], AbstractContextManager[Session]], action: str, what: dict[str, Any]) -> None:
    """One audit record of an instance-wide maintenance pass (no tenant, no acting user: the
    operator's command or the worker's schedule), in its own unit of work after the pass."""
    from openkb.audit import record_audit

    with units() as s:
        record_audit(s, tenant_id=None, actor=None, action=action, object_type=None, object_id=None, metadata=what)


# -- retention of detached rows (docs/data-model.md#assets) -----------------------------------------
# A row without a document is an upload nobody reads any more, or soon will not: a purged page's
# image (kept so that reverting the purge gets it back), an import's uploaded source, an upload
# never attached. ``detached_at`` says since when; after the retention the row goes, and its blob
# with its last row.

_DETACHED = (
    # a row that lost its document by another way than a purge (a cascade) counts from its upload
    "FROM document_assets a WHERE a.document_id IS NULL AND coalesce(a.detached_at, a.created_at) < :cutoff "
    # the source of an import that has not finished yet is still needed
    "AND NOT EXISTS (SELECT 1 FROM import_jobs j WHERE j.source_asset_id = a.id "
    "AND j.status IN ('pending', 'running'))"
)
_DETACHED_BATCH = text(f"SELECT a.id, a.object_key {_DETACHED} AND a.id > :after ORDER BY a.id LIMIT :n")  # noqa: S608
_DETACHED_COUNT = text(f"SELECT count(*) {_DETACHED}")  # noqa: S608
_STILL_DETACHED = text(f"SELECT a.id, a.object_key, a.size_bytes {_DETACHED} AND a.id = ANY(:ids)")  # noqa: S608
# what a prune would do, in one read: the rows due, and the blobs every row of which is due
_DRY_RUN = text(
    f"WITH due AS (SELECT a.id, a.object_key, a.size_bytes {_DETACHED}) "  # noqa: S608
    "SELECT (SELECT count(*) FROM due), (SELECT coalesce(sum(size_bytes), 0) FROM due), "
    "count(*), coalesce(sum(n), 0) FROM (SELECT max(b.size_bytes) AS n FROM document_assets b "
    "WHERE b.object_key IN (SELECT object_key FROM due) GROUP BY b.object_key "
    "HAVING bool_and(b.id IN (SELECT id FROM due))) g"
)


def prune_detached(
    units: Callable[[], AbstractContextManager[Session]],
    blobs: BlobStore,
    *,
    older_than: timedelta,
    dry_run: bool = False,
    batch: int = 500,
    now: datetime | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Delete the asset rows that have had no document for longer than ``older_than``, and each of
    their blobs no remaining row shares: what ``openkb assets prune`` and the worker's daily pass
    (``ASSET_RETENTION_DAYS``) do. Until then a revert of the purge re-attaches them.

    One transaction per batch of rows (by id): the rows sharing their blobs are locked, then the
    batch is read again under the locks, so a row re-attached meanwhile (a revert) or now the
    source of a running import stays. An import job whose source goes keeps its row
    (``source_asset_id`` becomes NULL). Safe to interrupt and to re-run. ``dry_run``: count,
    change nothing: one read of what the prune would take now, the blobs all of whose rows are
    due counted as freed (a blob two due rows share is counted once, whichever batches they fall
    in)."""
    cutoff = (now or utcnow()) - older_than
    if dry_run:
        with units() as s:
            rows, row_bytes, blobs_removed, freed = s.execute(_DRY_RUN, {"cutoff": cutoff}).one()
        if progress is not None:
            progress(rows, rows)
        return {"rows": rows, "row_bytes": int(row_bytes), "blobs_removed": blobs_removed, "bytes_freed": int(freed)}
    with units() as s:
        total = s.execute(_DETACHED_COUNT, {"cutoff": cutoff}).scalar_one()
    out: dict[str, Any] = {"rows": 0, "row_bytes": 0, "blobs_removed": 0, "bytes_freed": 0}
    after = uuid.UUID(int=0)
    while True:
        with units() as s:
            found = s.execute(_DETACHED_BATCH, {"cutoff": cutoff, "after": after, "n": batch}).all()
            if not found:
                break
            after = found[-1][0]
            s.execute(_LOCK_SHARERS, {"k": sorted({k for _id, k in found})}).all()
            # read again under the locks: a revert may have re-attached a row, an import started
            rows = s.execute(_STILL_DETACHED, {"cutoff": cutoff, "ids": [i for i, _k in found]}).all()
            if rows:
                keys = [k for _i, k, _n in rows]
                gone = _delete_rows(s, blobs, [i for i, _k, _n in rows], keys)
                sizes = {k: n for _i, k, n in rows}
                out["rows"] += len(rows)
                out["row_bytes"] += sum(n for _i, _k, n in rows)
                out["blobs_removed"] += len(gone)
                out["bytes_freed"] += sum(sizes[k] for k in gone)
        if progress is not None:
            progress(min(out["rows"], total), total)
    if out["rows"]:
        days = older_than / timedelta(days=1)
        _audit_maintenance(
            units, "assets.detached_pruned", out | {"older_than_days": days, "cutoff": cutoff.isoformat()}
        )
    return out


def _handle_prune(ctx: Any, _session: Session, **_: Any) -> dict[str, Any]:
    """The worker's daily pass (``assets_prune``): ``prune_detached`` with ``ASSET_RETENTION_DAYS``
    (0: nothing is pruned). Its own units of work, one per batch, on the context's engine."""
    days = ctx.settings.asset_retention_days
    if days <= 0:
        return {"skipped": "ASSET_RETENTION_DAYS is 0"}
    from openkb.db import session_scope

    return prune_detached(lambda: session_scope(ctx.engine), ctx.blobs, older_than=timedelta(days=days))


JOB_HANDLERS = {"assets_prune": _handle_prune}


_SUMMARY = text(
    "SELECT count(*), count(DISTINCT object_key), "
    "count(*) FILTER (WHERE document_id IS NULL), "
    "coalesce(sum(size_bytes) FILTER (WHERE document_id IS NULL), 0), "
    "min(coalesce(detached_at, created_at)) FILTER (WHERE document_id IS NULL) "
    "FROM document_assets"
)
_STORED = text(
    "SELECT coalesce(sum(n), 0) FROM (SELECT max(size_bytes) AS n FROM document_assets GROUP BY object_key) b"
)


def storage_summary(session: Session, *, retention_days: int, now: datetime | None = None) -> dict[str, Any]:
    """What the blob store holds for OpenKB and what the retention will free: rows, distinct blobs
    and their bytes; rows without a document, their bytes, how many are past ``retention_days``
    now and since when the oldest has waited. ``openkb assets status``."""
    now = now or utcnow()
    cutoff = now - timedelta(days=retention_days) if retention_days > 0 else None
    rows, blobs, detached, detached_bytes, oldest = session.execute(_SUMMARY).one()
    # what prune_detached would take now: the same condition (an unfinished import keeps its upload)
    due = session.execute(_DETACHED_COUNT, {"cutoff": cutoff}).scalar_one() if cutoff is not None else 0
    return {
        "assets": rows,
        "blobs": blobs,
        "stored_bytes": int(session.execute(_STORED).scalar_one()),
        "detached": detached,
        "detached_bytes": int(detached_bytes),
        "retention_days": retention_days,
        "due_for_pruning": due,
        "oldest_detached_at": oldest.isoformat() if oldest else None,
    }
