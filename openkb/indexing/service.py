"""Keeping Milvus a faithful copy of PostgreSQL's chunks: the one sync routine every writer uses.

``sync_documents`` is the whole index job: for a batch of documents it makes sure the current
version's ``document_chunks`` exist (chunking it once; the rows and their ids are reused on
every later run, and a chunk a save left alone keeps its id: ``stable_chunk_ids``), computes each
chunk's Milvus row (access fields from
``openkb.permissions.chunk_access_many`` and nowhere else), compares with what each target
collection holds, and then writes only the difference:

* a chunk missing from Milvus (or whose title changed: the title is part of the embedded text)
  -> full upsert, which makes Milvus call the TEXTEMBEDDING function;
* a chunk whose scalar fields changed (move, permission mode, visibility, status, metadata, or
  a save that left the chunk as it was: its version and ordinal) -> partial upsert of the
  scalars only (less to send; a Milvus server still runs its functions on the merged row, so the
  chunk is embedded again: docs/retrieval.md#what-a-change-costs; the embedded Lite keeps the
  stored vector: docs/retrieval.md#partial-updates);
* a Milvus row no longer wanted (an old version, a deleted document) -> delete.

Running it twice changes nothing the second time, which is what makes the huey jobs idempotent
and lets ``verify --repair`` and the rebuild's catch-up reuse it. Targets are the collection the
active alias points at plus every collection a running rebuild is filling (see ``Target``).

Which rows exist: one per current chunk of every page whose own status is not ``deleted``. A
page under a deleted folder keeps its rows (with the effective ``doc_status`` "deleted", so the
prefilter skips them) — that keeps "rows == PostgreSQL chunks" a plain SQL count.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.orm.util import identity_key
from sqlmodel import Session, col, select

from openkb.context import AppContext
from openkb.errors import (
    ConfigError,
    IndexDataRejected,
    IndexError_,
    IndexUnavailable,
    OpenKBError,
    ValidationError,
)
from openkb.facts.mentions import record_chunks as record_mentions
from openkb.indexing import milvus as mv
from openkb.indexing.chunker import CHUNKER_VERSION, chunk_markdown, index_text
from openkb.indexing.history import record_switch, share_alias_lock
from openkb.indexing.profiles import (
    DEFAULT_PROFILE_NAME,
    active_profile,
    backend_of,
    current_target,
    find_by_collection,
    insert_profile,
    list_profiles,
    mark_active,
    point_alias,
    spec_of,
)
from openkb.indexing.profiles_spec import ProfileSpec, make_profile
from openkb.logthrottle import throttled
from openkb.models import DocumentChunk, IndexRebuildJob, MilvusIndexProfile
from openkb.permissions import chunk_access_many

log = logging.getLogger("openkb.indexing")

BATCH_DOCS = 200
ALL_STREAMED = "ffffffff-ffff-ffff-ffff-ffffffffffff"
_UUIDS = ARRAY(UUID(as_uuid=False))
# Fields compared to decide a partial update (title is compared separately: it needs a full one).
SCALAR_FIELDS = (
    "tenant_id",
    "workspace_id",
    "knowledge_base_id",
    "version_id",
    "is_current",
    "doc_status",
    "scope_doc",
    "visibility_eff",
    "metadata",
    "access_principals",
    "created_at",
    "updated_at",
)
_COMPARE_OUTPUT = ("id", "document_id", "title", *SCALAR_FIELDS)
_PROFILE_LOCK = 0x6F6B62_01  # pg advisory lock key: creating the default profile


def ms(t: datetime | None) -> int:
    return int(t.timestamp() * 1000) if t else 0


# --- targets -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A collection writers keep in sync.

    ``upsert_upto``: for a collection a rebuild is filling, the last chunk id the rebuild has
    streamed. Writers upsert only chunks at or below it (the rebuild inserts the rest itself,
    reading PostgreSQL when it gets there, so nothing is inserted twice) but delete and update
    anywhere. ``None`` = no limit (the active collection)."""

    collection: str
    spec: ProfileSpec
    upsert_upto: str | None = None
    rebuild_job_id: uuid.UUID | None = None

    def may_insert(self, chunk_id: str) -> bool:
        return self.upsert_upto is None or chunk_id <= self.upsert_upto


def write_targets(ctx: AppContext, session: Session, *, ensure: bool = True) -> list[Target]:
    """The active collection (created with the default profile if nothing is set up yet) plus
    every collection a running rebuild fills."""
    targets: list[Target] = []
    prof = active_profile(ctx, session)
    if prof is None and ensure:
        prof = ensure_default_profile(ctx, session)
    active = prof.collection_name if prof is not None else None
    if prof is not None:
        targets.append(Target(prof.collection_name, spec_of(prof)))
    jobs = session.exec(select(IndexRebuildJob).where(IndexRebuildJob.status == "running")).all()
    for job in jobs:
        if job.target_collection == active or job.profile_id is None:
            continue
        p = session.get(MilvusIndexProfile, job.profile_id)
        if p is None or any(t.collection == job.target_collection for t in targets):
            continue
        targets.append(
            Target(
                job.target_collection,
                spec_of(p),
                upsert_upto=str(job.last_chunk_id) if job.last_chunk_id else "",
                rebuild_job_id=job.id,
            )
        )
    return targets


# --- default profile, warm-up ------------------------------------------------------------------


def default_spec(ctx: AppContext) -> ProfileSpec:
    """The embedded default: BM25 (jieba on Lite) plus dense vectors from the local embedder
    through a TEXTEMBEDDING function, or BM25 alone when no embedding model could be loaded."""
    backend = backend_of(ctx)
    url = ctx.endpoints.embedder_url
    if url:
        from openkb.embedder.models import REGISTRY

        model = ctx.settings.openkb_embedder_model
        info = REGISTRY.get(model)
        if info is not None:
            return make_profile(
                model_name=model, dim=info.dim, base_url=url, backend=backend, name=DEFAULT_PROFILE_NAME
            )
        log.warning(
            "embedding model %s has no known dimension; the default profile is BM25-only "
            "(create one with `openkb profile create --model %s --dim N --endpoint %s`)",
            model,
            model,
            url,
        )
    return make_profile(model_name=None, dim=0, backend=backend, name=DEFAULT_PROFILE_NAME)


def ensure_default_profile(ctx: AppContext, session: Session) -> MilvusIndexProfile | None:
    """Run on every ``openkb up`` (and by the first index job): make sure the active alias points
    at a loaded collection with a profile row. Creates the default profile and its collection on
    a fresh install; never replaces a configured one. Returns the active profile."""
    session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PROFILE_LOCK})
    client, alias = ctx.milvus, ctx.settings.milvus_active_alias
    target = current_target(client, alias)
    if target:
        prof = find_by_collection(session, target)
        if prof is None:
            spec = default_spec(ctx)
            if spec.collection_name != target or not client.has_collection(target):
                log.warning("alias %s points at %s, which no index profile describes; leaving it alone", alias, target)
                return None
            prof = insert_profile(session, spec, status="active")
        mv.ensure_collection(client, spec_of(prof))
        if prof.status != "active":
            mark_active(session, prof, alias)
        return prof
    prof = next((p for p in list_profiles(session) if p.name == DEFAULT_PROFILE_NAME), None)
    if prof is None:
        prof = insert_profile(session, default_spec(ctx))
    spec = spec_of(prof)
    created = mv.ensure_collection(client, spec)
    previous = point_alias(client, alias, spec.collection_name)
    mark_active(session, prof, alias)
    record_switch(
        session,
        alias=alias,
        from_collection=previous,
        to_collection=spec.collection_name,
        kind="initial" if previous is None else "switch",
        actor=None,
    )
    if created and pg_chunk_count(session):
        log.warning(
            "created %s while PostgreSQL already holds chunks: run `openkb index verify --repair` to fill it",
            spec.collection_name,
        )
    log.info(
        "default index profile %s -> %s (%s)",
        prof.name,
        spec.collection_name,
        "BM25 + dense" if spec.has_dense else "BM25-only",
    )
    return prof


def warm_active(ctx: AppContext) -> dict[str, Any]:
    """Load the active collection and run a search through it before the API reports ready, so no
    user pays Milvus Lite's first-search warm-up (~13 s on a cold 100k collection)."""
    from openkb.db import session_scope

    with session_scope(ctx.engine) as s:
        prof = active_profile(ctx, s)
    if prof is None:
        return {"skipped": "no active collection yet"}
    spec = spec_of(prof)
    seconds = mv.warm(ctx.milvus, ctx.settings.milvus_active_alias, spec)
    return {
        "alias": ctx.settings.milvus_active_alias,
        "collection": prof.collection_name,
        "profile": prof.name,
        "dense": spec.has_dense,
        "seconds": round(seconds, 2),
    }


# --- PostgreSQL side -----------------------------------------------------------------------------

_COUNT_SQL = text("""
SELECT count(*) FROM document_chunks c
JOIN documents d ON d.id = c.document_id AND d.current_version_id = c.version_id
WHERE d.type = 'page' AND d.status <> 'deleted' AND d.deleted_at IS NULL
""")


def pg_chunk_count(session: Session) -> int:
    """Rows the index should hold: current chunks of pages that are not deleted themselves."""
    return int(session.execute(_COUNT_SQL).scalar_one())


_DOCS_SQL = text("""
SELECT d.id::text AS id, d.tenant_id::text AS tenant_id, d.workspace_id::text AS workspace_id,
       d.knowledge_base_id::text AS knowledge_base_id, d.type, d.title, d.status, d.deleted_at,
       d.current_version_id::text AS current_version_id, d.metadata AS meta, d.tags, d.created_at, d.updated_at,
       d.indexed_version_id::text AS indexed_version_id
FROM documents d WHERE d.id = ANY(:ids)
""").bindparams(bindparam("ids", type_=_UUIDS))


@dataclass
class DocInfo:
    id: str
    tenant_id: str
    workspace_id: str
    knowledge_base_id: str
    type: str
    title: str
    status: str
    deleted_at: datetime | None
    current_version_id: str | None
    meta: dict[str, Any]
    tags: list[str]
    created_at: datetime
    updated_at: datetime
    indexed_version_id: str | None = None

    @property
    def indexed_current(self) -> bool:
        """The current version went through a successful sync (even if it made no chunks)."""
        return self.current_version_id is not None and self.indexed_version_id == self.current_version_id

    @property
    def wants_rows(self) -> bool:
        return (
            self.type == "page"
            and self.current_version_id is not None
            and self.status != "deleted"
            and self.deleted_at is None
        )


def load_docs(session: Session, ids: Sequence[str]) -> dict[str, DocInfo]:
    rows = session.execute(_DOCS_SQL, {"ids": list(ids)}).mappings().all()
    return {r["id"]: DocInfo(**{k: r[k] for k in DocInfo.__dataclass_fields__}) for r in rows}


def _lock_documents(session: Session, ids: Sequence[str]) -> None:
    """Serialize concurrent jobs on the same documents (two saves in a row, a subtree job and a
    save) until this transaction ends; sorted, so two batches never deadlock."""
    session.execute(
        text("SELECT pg_advisory_xact_lock(hashtextextended(x, 7)) FROM unnest(CAST(:ids AS text[])) x ORDER BY x"),
        {"ids": sorted(ids)},
    )


_CHUNK_IDS = uuid.UUID("6f70656e-6b62-4368-b56e-6b2d69647331")  # the namespace of stable chunk ids


def stable_chunk_ids(document_id: str, chunks: Sequence[Any]) -> list[uuid.UUID]:
    """The ids of a version's chunks: the same chunk of the same document gets the same id in
    every version (its heading path, text and Markdown, the chunker's version, and which copy it
    is when the page repeats it), so a save keeps the Milvus rows of the chunks it left alone.

    Why: a save used to give every chunk a new row, and Milvus embeds every new row; a one-word
    edit of a 50-chunk page sent 50 chunks to the embedding service. Now only the chunks the edit
    changed are new rows; the others change their scalars (version, ordinal) in a partial update,
    which the embedded Milvus Lite applies without embedding again
    (docs/retrieval.md#partial-updates; a Milvus server merges and embeds the row again, as it did
    the new one). The title is not part of the id: a rename rewrites every row whole, as before
    (the title is in the embedded text)."""
    seen: dict[str, int] = {}
    out = []
    for c in chunks:
        heading = json.dumps(list(c.heading_path), ensure_ascii=False)
        key = "\x1f".join((document_id, CHUNKER_VERSION, heading, c.content_text, c.content_markdown))
        n = seen[key] = seen.get(key, -1) + 1
        out.append(uuid.uuid5(_CHUNK_IDS, f"{key}\x1f{n}"))
    return out


def ensure_chunks(session: Session, docs: Iterable[DocInfo]) -> dict[str, list[DocumentChunk]]:
    """The current version's chunks per document, chunking (once) where they don't exist yet or
    were made by another chunker version; chunks of other versions are deleted."""
    wanted = {d.id: d for d in docs if d.wants_rows}
    if not wanted:
        return {}
    ids = list(wanted)
    session.execute(
        text("""
        DELETE FROM document_chunks c USING documents d
        WHERE c.document_id = d.id AND d.id = ANY(:ids) AND c.version_id IS DISTINCT FROM d.current_version_id
    """).bindparams(bindparam("ids", type_=_UUIDS)),
        {"ids": ids},
    )
    existing = session.exec(
        select(DocumentChunk)
        .where(col(DocumentChunk.document_id).in_([uuid.UUID(i) for i in ids]))
        .order_by(col(DocumentChunk.document_id), col(DocumentChunk.ordinal))
    ).all()
    by_doc: dict[str, list[DocumentChunk]] = {i: [] for i in ids}
    for c in existing:
        by_doc[str(c.document_id)].append(c)
    redo = [
        i for i, cs in by_doc.items() if not cs or any((c.meta or {}).get("chunker") != CHUNKER_VERSION for c in cs)
    ]
    if not redo:
        return by_doc
    versions = session.execute(
        text(
            "SELECT v.document_id::text AS d, v.id::text AS v, v.markdown FROM document_versions v WHERE v.id = ANY(:vids)"
        ).bindparams(bindparam("vids", type_=_UUIDS)),
        {"vids": [wanted[i].current_version_id for i in redo]},
    ).all()
    md_of = {d: (v, md) for d, v, md in versions}
    stale = [c.id for i in redo for c in by_doc[i]]
    if stale:
        session.execute(
            text("DELETE FROM document_chunks WHERE id = ANY(:ids)").bindparams(bindparam("ids", type_=_UUIDS)),
            {"ids": [str(x) for x in stale]},
        )
    for i in redo:
        d = wanted[i]
        vid, md = md_of.get(i, (d.current_version_id, ""))
        pieces = chunk_markdown(md or "")
        ids = stable_chunk_ids(d.id, pieces)
        for cid in ids:  # a row of an earlier version with this id was deleted above, by SQL
            held = session.identity_map.get(identity_key(DocumentChunk, cid))
            if held is not None:
                session.expunge(held)
        rows = [
            DocumentChunk(
                id=cid,
                tenant_id=uuid.UUID(d.tenant_id),
                workspace_id=uuid.UUID(d.workspace_id),
                knowledge_base_id=uuid.UUID(d.knowledge_base_id),
                document_id=uuid.UUID(d.id),
                version_id=uuid.UUID(vid),
                ordinal=c.ordinal,
                heading_path=c.heading_path,
                content_text=c.content_text,
                content_markdown=c.content_markdown,
                token_count=c.token_count,
                meta=c.metadata,
            )
            for cid, c in zip(ids, pieces, strict=True)
        ]
        session.add_all(rows)
        by_doc[i] = rows
    session.flush()
    record_mentions(session, [c for i in redo for c in by_doc[i]])  # entities named in them (docs/facts.md#mentions)
    return by_doc


def milvus_row(doc: DocInfo, chunk: DocumentChunk, access: Any) -> dict[str, Any]:
    """The Milvus row of one chunk. Access fields come from ``chunk_access`` only."""
    return mv.chunk_row(
        chunk_id=chunk.id,
        tenant_id=doc.tenant_id,
        workspace_id=doc.workspace_id,
        knowledge_base_id=doc.knowledge_base_id,
        document_id=doc.id,
        version_id=chunk.version_id,
        doc_status=access.doc_status if access else "deleted",
        visibility_eff=access.visibility_eff if access else "private",
        scope_doc=access.scope_doc if access else "",
        is_current=True,
        title=doc.title,
        heading_path=list(chunk.heading_path or []),
        content_text=index_text(doc.title, chunk.heading_path or [], chunk.content_text),
        content_markdown=chunk.content_markdown,
        metadata=_row_metadata(doc, chunk.ordinal),
        access_principals=list(access.access_principals) if access else [],
        created_at=ms(doc.created_at),
        updated_at=ms(doc.updated_at),
    )


def _row_metadata(doc: DocInfo, ordinal: int) -> dict[str, Any]:
    """Tags, ordinal and the document's metadata. Results take metadata from PostgreSQL; this copy
    is for Milvus-side use (2.6 JSON filters), so an oversized one is left out, not failed on."""
    meta: dict[str, Any] = {"tags": list(doc.tags or []), "ordinal": ordinal, "document": dict(doc.meta or {})}
    if len(json.dumps(meta, default=str)) > 60_000:  # Milvus' JSON field limit is 64 KiB
        meta["document"] = {}
        meta["document_truncated"] = True
    return meta


def desired_rows(session: Session, docs: dict[str, DocInfo]) -> dict[str, dict[str, Any]]:
    """chunk id -> Milvus row for these documents (chunking where needed)."""
    chunks = ensure_chunks(session, docs.values())
    if not chunks:
        return {}
    access = {str(k): v for k, v in chunk_access_many(session, list(chunks)).items()}
    out: dict[str, dict[str, Any]] = {}
    for did, cs in chunks.items():
        for c in cs:
            out[str(c.id)] = milvus_row(docs[did], c, access.get(did))
    return out


# --- Milvus side ---------------------------------------------------------------------------------


@dataclass
class SyncReport:
    documents: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    collections: list[str] = field(default_factory=list)

    def add(self, other: SyncReport) -> None:
        self.documents += other.documents
        self.inserted += other.inserted
        self.updated += other.updated
        self.deleted += other.deleted
        self.collections = sorted(set(self.collections) | set(other.collections))

    def as_dict(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "inserted": self.inserted,
            "updated": self.updated,
            "deleted": self.deleted,
            "collections": self.collections,
        }


def _quote(ids: Iterable[str]) -> str:
    return "[" + ", ".join(f'"{mv._check_id(i, "id")}"' for i in ids) + "]"


def existing_rows(
    client: Any, collection: str, doc_ids: Sequence[str], fields: Sequence[str] = _COMPARE_OUTPUT
) -> list[dict[str, Any]]:
    if not doc_ids:
        return []
    expr = f"document_id in {_quote(doc_ids)}"
    rows = mv.query_rows(client, collection, expr, output_fields=fields, limit=16384)
    if len(rows) >= 16384:
        rows = mv.query_rows(client, collection, expr, output_fields=fields, limit=None)
    return rows


def _differs(have: dict[str, Any], want: dict[str, Any]) -> bool:
    return any(have.get(f) != want.get(f) for f in SCALAR_FIELDS)


_FLUSH_LOCK_SALT = 17


_FLUSH_RACE_RETRIES = 5  # Lite's "current_seq is monotonic" when a write overlaps the flush


@contextmanager
def _lite_collection_lock(ctx: AppContext, collection: str) -> Iterator[None]:
    """Hold the cluster-wide lock of one Lite collection's files (its flushes and its drop): a
    PostgreSQL advisory lock keyed by the name, on a connection of its own, because the holders
    are threads of one process and other processes alike (see ``flush_collection``)."""
    key = {"k": f"openkb-flush-{collection}"}
    with ctx.engine.connect() as conn:
        conn.execute(text(f"SELECT pg_advisory_lock(hashtextextended(:k, {_FLUSH_LOCK_SALT}))"), key)
        try:
            yield
        finally:
            conn.execute(text(f"SELECT pg_advisory_unlock(hashtextextended(:k, {_FLUSH_LOCK_SALT}))"), key)
            conn.commit()


def drop_collection(ctx: AppContext, collection: str) -> None:
    """Drop ``collection`` (``milvus.drop_collection``: refused while an alias points at it),
    never in the middle of a flush of it.

    Why: a flush of this process may still be waiting (``request_flush``) or running in a
    timer thread, and a drop that overlaps a flush on Lite fails half-way ("No such file or
    directory: 'manifest.json.tmp'", seen in CI when a collection was dropped right after its
    trailing flush started). The waiting flush is cancelled (nothing is left to flush) and the
    drop takes the collection's flush lock, so a flush running anywhere finishes first."""
    with _GATES_LOCK:
        gates = [g for (_, name), (_, g) in _GATES.items() if name == collection]
    for gate in gates:
        with gate.lock:
            timer, gate.timer = gate.timer, None
        if timer is not None:
            timer.cancel()
    if backend_of(ctx) != "lite":
        mv.drop_collection(ctx.milvus, collection)
        return
    with _lite_collection_lock(ctx, collection):
        mv.drop_collection(ctx.milvus, collection)


def flush_collection(ctx: AppContext, collection: str) -> None:
    """Flush ``collection``, one flusher at a time per collection on Milvus Lite.

    Why: Lite's flush is not safe when two writers flush the same collection at once; about one
    index job in 5,000 failed with "Flush failed: current_seq is monotonic" under
    ``openkb worker --workers 2``. The writers are threads of one worker *and* other processes
    (a second worker, ``index rebuild``/``verify`` from the CLI), so the lock is a PostgreSQL
    advisory lock keyed by the collection name, held on its own connection only around the
    flush (writes themselves stay concurrent; the flush is ~10 ms). Every OpenKB writer flushes
    through here; ``milvus.upsert_rows(..., flush=True)`` is for tests and benches.

    The lock alone is not enough: a flush that overlaps another writer's *insert* fails on Lite
    the same way (seen in CI: 4 threads upserting and flushing one collection). A flush is
    idempotent, so under the lock that error is retried a few times, briefly, before it counts.

    A Milvus 2.6 server coordinates flushes itself (the data coordinator serialises segment
    sealing), so there the flush runs unlocked, as before. Lite must flush at all because
    filtered searches over unflushed rows are slow there (see ``openkb.indexing.milvus``)."""
    from pymilvus.exceptions import MilvusException

    client = ctx.milvus
    try:
        if backend_of(ctx) != "lite":
            client.flush(collection)
            return
        with _lite_collection_lock(ctx, collection):
            for attempt in range(_FLUSH_RACE_RETRIES + 1):
                try:
                    client.flush(collection)
                    break
                except MilvusException as exc:
                    if "current_seq is monotonic" not in str(exc.message) or attempt == _FLUSH_RACE_RETRIES:
                        raise
                    time.sleep(0.02 * (attempt + 1))
    except MilvusException as exc:
        raise IndexError_(f"flush of {collection} failed: {exc.message}") from exc


# --- coalesced flushes ---------------------------------------------------------------------------

#: seconds between two flushes of one collection requested by index jobs of one process
#: (``request_flush``); 0 flushes after every job. Five, not one (docs/retrieval.md#flushes):
#: at the soak's ~10 saves/s, bench/lite_flush.py measured Lite's CPU per save rising from 12.2
#: to 14.8 ms over 6,000 saves when flushing every 10th save (one a second), and flat at ~11 ms
#: flushing every 50th; rows are searched before their flush either way
FLUSH_INTERVAL_S = 5.0


@dataclass
class _FlushGate:
    """One collection's flush schedule in this process: when it last flushed, and the trailing
    flush waiting for the end of the interval (at most one)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    last: float = float("-inf")
    timer: threading.Timer | None = None


_GATES: dict[tuple[int, str], tuple[AppContext, _FlushGate]] = {}
_GATES_LOCK = threading.Lock()


def _gate(ctx: AppContext, collection: str) -> _FlushGate:
    with _GATES_LOCK:
        entry = _GATES.get((id(ctx), collection))
        if entry is None or entry[0] is not ctx:
            entry = _GATES[(id(ctx), collection)] = (ctx, _FlushGate())
        return entry[1]


def request_flush(ctx: AppContext, collection: str, *, interval: float | None = None) -> bool:
    """Flush ``collection`` after an index job's writes: at once when this process has not
    flushed it within ``interval`` seconds (``FLUSH_INTERVAL_S``), otherwise once at the end of
    the interval (one trailing flush for every job in between). Returns True when it flushed now.

    Why (docs/retrieval.md#flushes): on Milvus Lite every flush writes a data file and, when the
    job deleted rows (each save replaces its page's chunks), a delta file; Lite rewrites its
    manifest, which lists every delta file, on each flush and compaction, and keeps delta files
    and their tombstones as long as any older row lives (in practice forever: pages nobody edits
    keep the oldest rows). One flush per save made that work grow with every save since Lite
    started: the soak's throughput fell to 0.82 of its first quarter in ten minutes. A Milvus
    2.6 server seals a segment per flush and compacts the small ones later: the same advice.

    Trap: nothing is lost or hidden while a flush waits. Rows written and not yet flushed are
    searched and queried (Lite's memtable, a server's growing segment) and are durable (Lite's
    WAL, written through to the OS on every write: a killed Lite keeps them); only Lite's
    filtered searches over them are slower, and an interval's worth is a few dozen rows.
    Callers that need the files written now (verify, rebuild, tests) call ``flush_collection``."""
    interval = FLUSH_INTERVAL_S if interval is None else interval
    if interval <= 0:
        flush_collection(ctx, collection)
        return True
    gate = _gate(ctx, collection)
    with gate.lock:
        now = time.monotonic()
        due = gate.last + interval
        if now >= due and gate.timer is None:
            gate.last = now
        else:
            if gate.timer is None:
                gate.timer = threading.Timer(max(0.0, due - now), _trailing_flush, args=(ctx, collection, gate))
                gate.timer.daemon = True
                gate.timer.start()
            return False
    flush_collection(ctx, collection)
    return True


def _trailing_flush(ctx: AppContext, collection: str, gate: _FlushGate) -> None:
    with gate.lock:
        if gate.timer is None:  # flush_pending ran it already
            return
        gate.timer = None
        gate.last = time.monotonic()
    try:
        flush_collection(ctx, collection)
    except Exception as exc:  # noqa: BLE001 - the rows stay searchable; the next flush covers them
        throttled(log, f"flush-{collection}", logging.WARNING, "deferred flush of %s failed: %s", collection, exc)


def flush_pending(ctx: AppContext | None = None) -> list[str]:
    """Run every trailing flush that is waiting (of ``ctx``, or of every context) now; returns
    the collections flushed. For a worker that stops, and for tests."""
    with _GATES_LOCK:
        entries = [(key[1], c, g) for key, (c, g) in _GATES.items() if ctx is None or c is ctx]
    done = []
    for collection, c, gate in entries:
        with gate.lock:
            timer, gate.timer = gate.timer, None
            if timer is None:
                continue
            timer.cancel()
            gate.last = time.monotonic()
        flush_collection(c, collection)
        done.append(collection)
    return done


def apply_rows(
    ctx: AppContext,
    target: Target,
    doc_ids: Sequence[str],
    desired: dict[str, dict[str, Any]],
    *,
    batch_size: int = 256,
) -> SyncReport:
    """Make ``target`` hold exactly ``desired`` for these documents (see the module docstring)."""
    client = ctx.milvus
    rep = SyncReport(collections=[target.collection])
    have = {r["id"]: r for r in existing_rows(client, target.collection, doc_ids)}
    full = [
        row
        for cid, row in desired.items()
        if target.may_insert(cid) and (cid not in have or have[cid].get("title") != row["title"])
    ]
    full_ids = {r["id"] for r in full}
    partial = [
        {"id": cid, **{f: row[f] for f in SCALAR_FIELDS}}
        for cid, row in desired.items()
        if cid in have and cid not in full_ids and _differs(have[cid], row)
    ]
    gone = [cid for cid in have if cid not in desired]
    try:
        if full:
            rep.inserted = mv.upsert_rows(client, target.collection, full, batch_size=batch_size, flush=False)
        for start in range(0, len(partial), 1000):
            client.upsert(target.collection, partial[start : start + 1000], partial_update=True)
        rep.updated = len(partial)
        if gone:
            rep.deleted = mv.delete_rows(client, target.collection, gone, flush=False) or len(gone)
        if full or partial or gone:
            request_flush(ctx, target.collection)
    except OpenKBError:
        raise
    except Exception as exc:
        raise classify(exc, f"writing to {target.collection} failed") from exc
    return rep


# --- the job body --------------------------------------------------------------------------------


def sync_documents(
    ctx: AppContext,
    session: Session,
    doc_ids: Iterable[str | uuid.UUID],
    *,
    targets: Sequence[Target] | None = None,
    lock: bool = True,
    mark_status: bool = True,
) -> SyncReport:
    """Bring these documents' Milvus rows in line with PostgreSQL in every target collection."""
    ids = sorted({str(d) for d in doc_ids})
    total = SyncReport()
    if not ids:
        return total
    if targets is None:  # the active collection, as of now: no alias move until this commits
        share_alias_lock(session, ctx.settings.milvus_active_alias)
    tgts = list(targets) if targets is not None else write_targets(ctx, session)
    if not tgts:
        raise ConfigError(
            f"the alias {ctx.settings.milvus_active_alias} points at no collection OpenKB knows; "
            "see `openkb index status`"
        )
    for start in range(0, len(ids), BATCH_DOCS):
        batch = ids[start : start + BATCH_DOCS]
        if lock:
            _lock_documents(session, batch)
        docs = load_docs(session, batch)
        desired = desired_rows(session, docs)
        for t in tgts:
            total.add(apply_rows(ctx, t, batch, desired))
        total.documents += len(batch)
        if mark_status:
            _mark_indexed(session, [d for d in docs.values() if d.status != "deleted" and d.deleted_at is None])
    return total


def sync_each(ctx: AppContext, doc_ids: list[str], *, targets: Any = None) -> tuple[dict[str, Any], dict[str, str]]:
    """Sync ``doc_ids`` in batches, each in its own unit of work; a batch Milvus refuses for its
    data is retried one document at a time, so one bad document fails alone and every other
    one is indexed. Returns (totals, {document id: reason} for the permanent failures).
    A transient error is recorded on the batch it hit (earlier batches stay ``indexed``) and
    propagates: the caller retries the whole call, which is idempotent."""
    total: dict[str, Any] = {"documents": 0, "inserted": 0, "updated": 0, "deleted": 0}
    rejected: dict[str, str] = {}

    def run(ids: list[str]) -> dict[str, Any]:
        from openkb.db import session_scope

        with session_scope(ctx.engine) as s:  # commit per batch: short locks, resumable progress
            return sync_documents(ctx, s, ids, targets=targets).as_dict()

    def add(rep: dict[str, Any]) -> None:
        for k in ("documents", "inserted", "updated", "deleted"):
            total[k] += rep[k]

    for start in range(0, len(doc_ids), BATCH_DOCS):
        part = doc_ids[start : start + BATCH_DOCS]
        try:
            try:
                add(run(part))
                continue
            except (IndexDataRejected, ValidationError):  # a row OpenKB or Milvus cannot write
                if len(part) > 1:
                    log.warning("a batch of %d documents was refused for its data; syncing them one by one", len(part))
            for one in part:
                try:
                    add(run([one]))
                except (IndexDataRejected, ValidationError) as exc:
                    rejected[one] = f"{exc.code}: {exc.detail}"
                    record_failure(ctx, [one], rejected[one], permanent=True)
        except Exception as exc:
            permanent = isinstance(exc, OpenKBError) and not exc.retryable
            reason = f"{exc.code}: {exc.detail}" if isinstance(exc, OpenKBError) else f"{type(exc).__name__}: {exc}"
            record_failure(ctx, [d for d in part if d not in rejected], reason, permanent=permanent)
            raise
    return total, rejected


def _mark_indexed(session: Session, docs: Sequence[DocInfo]) -> None:
    """indexed + indexed_version_id, only where the indexed version is still the current one (a
    newer save has its own job and stays ``pending``). ``updated_at`` is left alone."""
    params = [{"id": d.id, "v": d.current_version_id} for d in docs]
    if not params:
        return
    session.execute(
        text("""
        UPDATE documents SET index_status = 'indexed', index_error = NULL, index_attempts = 0,
               index_failure = NULL, index_checked_at = now(), indexed_version_id = CAST(:v AS uuid)
        WHERE id = CAST(:id AS uuid) AND current_version_id IS NOT DISTINCT FROM CAST(:v AS uuid)
          AND (index_status <> 'indexed' OR index_error IS NOT NULL OR index_attempts <> 0
               OR index_failure IS NOT NULL OR indexed_version_id IS DISTINCT FROM CAST(:v AS uuid))
    """),
        params,
    )


def record_failure(ctx: AppContext, doc_ids: Sequence[str], error: str, *, permanent: bool) -> None:
    """Record a failed index run in its own transaction (the job's own rolls back).

    Transient (Milvus or the embedder unreachable, any unexpected error): the documents stay
    ``pending``, ``index_failure = 'transient'``, ``index_attempts`` counts the run and
    ``index_error`` says why; the worker retries with backoff and, once its retries are spent,
    the reconciler re-enqueues them (``openkb.indexing.reconcile``): an outage delays indexing,
    it never fails a document. Permanent (Milvus refuses the document's data): ``failed`` with
    ``index_failure = 'permanent'`` at once, listed by ``openkb index status``, not retried until
    the document changes (docs/operations.md#index-operations)."""
    from openkb.db import session_scope

    ids = [str(d) for d in doc_ids][:10_000]
    if not ids:
        return
    try:
        with session_scope(ctx.engine) as s:
            s.execute(
                text("""
                UPDATE documents SET index_status = :st, index_attempts = index_attempts + 1,
                       index_failure = :kind, index_checked_at = now(),
                       index_error = :e || CASE WHEN :permanent THEN ' (not retried: fix the document)'
                                                ELSE ' (will retry; attempt ' || (index_attempts + 1)::text || ')' END
                WHERE id = ANY(:ids) AND type = 'page'
            """).bindparams(bindparam("ids", type_=_UUIDS)),
                {
                    "ids": ids,
                    "e": error[:1900],
                    "st": "failed" if permanent else "pending",
                    "kind": "permanent" if permanent else "transient",
                    "permanent": permanent,
                },
            )
    except Exception as exc:  # noqa: BLE001 - PostgreSQL down too: the reconciler finds them pending
        throttled(
            log,
            "record-failure",
            logging.WARNING,
            "could not record index failure for %d documents: %s",
            len(ids),
            str(exc).splitlines()[0][:200],
        )


def classify(exc: BaseException, what: str) -> OpenKBError:
    """The domain error for a failed Milvus write: ``IndexUnavailable`` (Milvus unreachable),
    ``IndexDataRejected`` (the rows themselves are refused: permanent) or ``IndexError_``
    (anything else Milvus refused: retried)."""
    from openkb.indexing.client import is_connection_error, is_data_error

    if isinstance(exc, OpenKBError):
        return exc
    msg = str(getattr(exc, "message", "") or exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
    if is_connection_error(exc):
        return IndexUnavailable(f"{what}: Milvus unreachable: {msg}", retry_after=5)
    if is_data_error(exc):
        return IndexDataRejected(f"{what}: {msg}")
    return IndexError_(f"{what}: {msg}")


# --- status ----------------------------------------------------------------------------------------


def index_status(ctx: AppContext, session: Session) -> dict[str, Any]:
    """What ``openkb index status`` and ``GET /api/admin/milvus/status`` show. ``in_sync``: Milvus
    holds as many rows as PostgreSQL has chunks (None when Milvus cannot be asked)."""
    from openkb.indexing.profiles import describe
    from openkb.runtime.lite_files import home_lite_files

    client, alias = ctx.milvus, ctx.settings.milvus_active_alias
    out: dict[str, Any] = {"alias": alias, "backend": backend_of(ctx), "milvus_uri": _mask(ctx.endpoints.milvus_uri)}
    try:
        target = current_target(client, alias)
        collections = set(client.list_collections())
        out["milvus"] = "ok"
    except Exception as exc:  # noqa: BLE001
        target, collections = None, set()
        out["milvus"] = f"unreachable: {exc}"[:300]
    out["collection"] = target
    prof = find_by_collection(session, target)
    out["profile"] = describe(prof, active_collection=target) if prof else None
    out["pg_chunks"] = pg_chunk_count(session)
    out["milvus_rows"] = None
    if target:
        try:
            out["milvus_rows"] = mv.count_rows(client, target)
        except OpenKBError as exc:
            out["milvus_rows_error"] = exc.detail
    # None: not known (Milvus unreachable or its count failed), not "differs"; no collection yet
    # (a fresh install: the appliance makes it when it starts, an index job when it first writes)
    # is in sync while PostgreSQL has no chunk either
    if out["milvus"] != "ok" or "milvus_rows_error" in out:
        out["in_sync"] = None
    elif target is None:
        out["in_sync"] = out["pg_chunks"] == 0
    else:
        out["in_sync"] = out["milvus_rows"] == out["pg_chunks"]
    # the embedded Lite's files: its tombstones pile up, and nothing else tells (docs/retrieval.md#flushes)
    out["lite"] = home_lite_files(ctx, target) if out["milvus"] == "ok" else None
    out["embedder"] = ctx.endpoints.embedder_url
    out["search_mode"] = (
        None
        if prof is None
        else ("hybrid (dense + BM25, score fusion)" if prof.vector_dim else "BM25-only")
        + (" + rerank" if prof and prof.rerank_function_name else "")
    )
    others = []
    for p in list_profiles(session):
        if p.collection_name == target:
            continue
        d = describe(p, active_collection=target)
        d["exists"] = p.collection_name in collections
        others.append(d)
    out["other_profiles"] = others
    job = session.exec(select(IndexRebuildJob).order_by(col(IndexRebuildJob.started_at).desc())).first()
    out["last_rebuild"] = None if job is None else rebuild_view(job)
    counts = session.execute(
        text(
            "SELECT index_status, count(*) FROM documents WHERE type = 'page' "
            "AND status <> 'deleted' GROUP BY index_status"
        )
    ).all()
    out["documents"] = {s: int(n) for s, n in counts}
    # permanent failures: Milvus refused these pages' data; they wait for an edit, not a retry
    out["failed"] = [
        {"document_id": r[0], "title": r[1], "error": r[2], "kind": r[3]}
        for r in session.execute(
            text(
                "SELECT id::text, title, index_error, coalesce(index_failure, 'transient') FROM documents "
                "WHERE type = 'page' AND status <> 'deleted' AND index_status = 'failed' "
                "ORDER BY index_checked_at DESC NULLS LAST LIMIT 50"
            )
        ).all()
    ]
    # pending pages whose last index run failed and that the worker is retrying
    out["retrying"] = int(
        session.execute(
            text(
                "SELECT count(*) FROM documents WHERE type = 'page' AND status <> 'deleted' AND index_status = 'pending' "
                "AND index_attempts > 0"
            )
        ).scalar_one()
    )
    return out


def rebuild_view(job: IndexRebuildJob) -> dict[str, Any]:
    return {
        "id": str(job.id),
        "status": job.status,
        "target_collection": job.target_collection,
        "target_alias": job.target_alias,
        "switch_on_success": job.switch_on_success,
        "total_chunks": job.total_chunks,
        "processed_chunks": job.processed_chunks,
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
        "error": job.error,
    }


def _mask(uri: str | None) -> str | None:
    if not uri or "@" not in uri:
        return uri
    scheme, _, rest = uri.partition("://")
    return f"{scheme}://***@{rest.split('@', 1)[1]}"


def now_ms() -> int:
    return int(time.time() * 1000)


__all__ = [
    "ConfigError",
    "SyncReport",
    "Target",
    "apply_rows",
    "default_spec",
    "desired_rows",
    "drop_collection",
    "ensure_default_profile",
    "flush_collection",
    "flush_pending",
    "index_status",
    "load_docs",
    "pg_chunk_count",
    "record_failure",
    "request_flush",
    "sync_documents",
    "sync_each",
    "warm_active",
    "write_targets",
]
