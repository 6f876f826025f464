"""Rebuild a profile's collection from PostgreSQL, then switch the active alias (docs/retrieval.md#rebuild).

The steps of ``run_rebuild``, each safe to interrupt:

1. create the new collection with the profile's functions (BM25, TEXTEMBEDDING, ...);
2. stream every current chunk from PostgreSQL in id order, in batches, and insert the raw text
   (Milvus embeds it); progress (``processed_chunks``, ``last_chunk_id``) is committed after
   each batch, so a killed rebuild resumes after the last committed batch (that batch is
   upserted, in case it reached Milvus before the kill);
3. catch up: documents and knowledge bases changed since the job started are re-synced;
4. flush, compact, load, warm;
5. health check: Milvus' row count equals PostgreSQL's (any difference is repaired by an id
   diff first) and sample searches of real chunks return results;
6. with ``switch``: point ``openkb_chunks_active`` at the new collection. The old collection
   is kept (profile ``deprecated``) for ``rollback``.

Until step 6 the alias never moves, so killing the process at any point leaves search on the
old collection. Edits during a rebuild reach the new collection twice over: index jobs write to
every collection a ``running`` rebuild fills (only chunks the stream has passed, see
``service.Target``), and step 3 re-syncs whatever changed meanwhile.

One process runs a given job at a time: the runner holds a PostgreSQL advisory lock for the
job; a job marked ``running`` whose lock is free belonged to a dead process and is resumed.
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from sqlalchemy import text
from sqlmodel import Session, col, select

from openkb.context import AppContext
from openkb.db import session_scope
from openkb.errors import Conflict, IndexError_, NotFound, OpenKBError, RebuildBusy, ValidationError
from openkb.indexing import milvus as mv
from openkb.indexing.history import (
    history_view,
    list_history,
    lock_alias,
    plan_rollback,
    record_switch,
    rollback_target,
)
from openkb.indexing.profiles import (
    audit_index,
    authorize_operator,
    current_target,
    find_by_collection,
    forget_active_profile,
    get_profile,
    mark_active,
    point_alias,
    spec_of,
)
from openkb.indexing.profiles_spec import ProfileSpec
from openkb.indexing.service import (
    ALL_STREAMED,
    DocInfo,
    SyncReport,
    Target,
    drop_collection,
    flush_collection,
    milvus_row,
    pg_chunk_count,
    rebuild_view,
    sync_documents,
)
from openkb.models import IndexRebuildJob, MilvusIndexProfile
from openkb.permissions import chunk_access_many
from openkb.permissions.principal import Principal

log = logging.getLogger("openkb.indexing.rebuild")

BATCH_SIZE = 512
FLUSH_EVERY = 20_000
CATCH_UP_MARGIN = timedelta(seconds=60)  # transactions that began before the job started
LIVE_STATUSES = ("pending", "running", "failed")

Progress = Callable[[int, int], None]


# --- liveness --------------------------------------------------------------------------------------


def _lock_key(job_id: uuid.UUID) -> str:
    return f"openkb-rebuild-{job_id}"


class _RunLock:
    """A session-level advisory lock on its own connection, held while the job runs."""

    def __init__(self, ctx: AppContext, job_id: uuid.UUID) -> None:
        self.conn = ctx.engine.connect()
        self.key = _lock_key(job_id)
        got = self.conn.execute(text("SELECT pg_try_advisory_lock(hashtextextended(:k, 11))"), {"k": self.key}).scalar()
        self.conn.commit()
        if not got:
            self.conn.close()
            raise RebuildBusy(f"rebuild {job_id} is running in another process")

    def release(self) -> None:
        try:
            self.conn.execute(text("SELECT pg_advisory_unlock(hashtextextended(:k, 11))"), {"k": self.key})
            self.conn.commit()
        finally:
            self.conn.close()


def is_alive(ctx: AppContext, job_id: uuid.UUID) -> bool:
    try:
        lock = _RunLock(ctx, job_id)
    except RebuildBusy:
        return True
    lock.release()
    return False


# --- job rows ----------------------------------------------------------------------------------------


def get_job(session: Session, job_id: uuid.UUID | str) -> IndexRebuildJob:
    try:
        job = session.get(IndexRebuildJob, uuid.UUID(str(job_id)))
    except ValueError:
        job = None
    if job is None:
        raise NotFound(f"no rebuild job {job_id}")
    return job


def list_jobs(session: Session, limit: int = 20) -> list[IndexRebuildJob]:
    return list(session.exec(select(IndexRebuildJob).order_by(col(IndexRebuildJob.started_at).desc()).limit(limit)))


def start_rebuild(
    ctx: AppContext, session: Session, principal: Principal, profile_ref: str | uuid.UUID, *, switch: bool = False
) -> IndexRebuildJob:
    """A new job for the profile, or the unfinished one (failed, or killed while running) to
    resume (audited as ``milvus.rebuild.start``). Refuses while another process runs it, and for
    the active collection (rebuilding a live collection in place would mix what searches see;
    ``index verify --repair`` fixes it). The caller runs it (CLI) or enqueues it (REST)."""
    authorize_operator(session, principal)
    job = _start_rebuild(ctx, session, profile_ref, switch=switch, started_by=principal.user_id)
    audit_index(
        session,
        principal,
        "milvus.rebuild.start",
        job_id=str(job.id),
        collection=job.target_collection,
        switch=switch,
        resumed=job.last_chunk_id is not None,
    )
    return job


def _start_rebuild(
    ctx: AppContext, session: Session, profile_ref: str | uuid.UUID, *, switch: bool, started_by: uuid.UUID | None
) -> IndexRebuildJob:
    prof = get_profile(session, profile_ref)
    alias = ctx.settings.milvus_active_alias
    if prof.collection_name == current_target(ctx.milvus, alias):
        unfinished = session.exec(
            select(IndexRebuildJob).where(
                IndexRebuildJob.target_collection == prof.collection_name,
                col(IndexRebuildJob.status).in_(LIVE_STATUSES),
                IndexRebuildJob.switch_on_success.is_(True),
            )
        ).first()
        if unfinished is not None and not is_alive(ctx, unfinished.id):
            # killed after the alias moved but before the job was marked done: finish the record
            unfinished.status, unfinished.finished_at, unfinished.error = "succeeded", datetime.now(UTC), None
            session.add(unfinished)
            mark_active(session, prof, alias)
            last = next(iter(list_history(session, alias, limit=1)), None)
            if last is None or last.to_collection != prof.collection_name:  # the switch's row was lost too
                record_switch(
                    session,
                    alias=alias,
                    from_collection=last.to_collection if last else None,
                    to_collection=prof.collection_name,
                    kind="switch",
                    actor=None,
                )
            return unfinished
        raise ValidationError(
            f"profile {prof.name} is the active collection; create a new profile (a new collection "
            "version) to rebuild, or run `openkb index verify --repair` to fix this one"
        )
    job = session.exec(
        select(IndexRebuildJob)
        .where(
            IndexRebuildJob.target_collection == prof.collection_name, col(IndexRebuildJob.status).in_(LIVE_STATUSES)
        )
        .order_by(col(IndexRebuildJob.started_at).desc())
    ).first()
    if job is not None:
        if job.status == "running" and is_alive(ctx, job.id):
            raise RebuildBusy(f"a rebuild of {prof.collection_name} is running (job {job.id})", job_id=str(job.id))
        job.switch_on_success = switch  # the re-run says what happens at the end
        job.profile_id = prof.id
        session.add(job)
        session.flush()
        return job
    job = IndexRebuildJob(
        tenant_id=None,
        profile_id=prof.id,
        target_collection=prof.collection_name,
        target_alias=alias,
        status="pending",
        switch_on_success=switch,
        started_by=started_by,
    )
    session.add(job)
    session.flush()
    return job


def _update_job(ctx: AppContext, job_id: uuid.UUID, **values: Any) -> None:
    with session_scope(ctx.engine) as s:
        job = s.get(IndexRebuildJob, job_id)
        assert job is not None
        for k, v in values.items():
            setattr(job, k, v)
        s.add(job)


# --- streaming ---------------------------------------------------------------------------------------

_STREAM_SQL = text("""
SELECT c.id::text AS id, c.document_id::text AS document_id, c.version_id::text AS version_id, c.ordinal,
       c.heading_path, c.content_text, c.content_markdown,
       d.tenant_id::text AS tenant_id, d.workspace_id::text AS workspace_id,
       d.knowledge_base_id::text AS knowledge_base_id, d.title, d.metadata AS meta, d.tags,
       d.created_at, d.updated_at
FROM document_chunks c
JOIN documents d ON d.id = c.document_id AND d.current_version_id = c.version_id
WHERE d.type = 'page' AND d.status <> 'deleted' AND d.deleted_at IS NULL AND c.id > CAST(:after AS uuid)
ORDER BY c.id
LIMIT :n
""")

_ZERO = "00000000-0000-0000-0000-000000000000"


def stream_rows(
    ctx: AppContext, after: str | None, batch_size: int = BATCH_SIZE
) -> Iterator[tuple[list[dict[str, Any]], str]]:
    """(Milvus rows, last chunk id) per batch of current chunks after ``after``, in id order."""
    access: dict[str, Any] = {}
    cursor = after or _ZERO
    while True:
        with Session(ctx.engine) as s:
            rows = s.execute(_STREAM_SQL, {"after": cursor, "n": batch_size}).mappings().all()
            if not rows:
                return
            new_docs = list({r["document_id"] for r in rows} - access.keys())
            if new_docs:
                access.update({str(k): v for k, v in chunk_access_many(s, new_docs).items()})
        out = []
        for r in rows:
            doc = DocInfo(
                id=r["document_id"],
                tenant_id=r["tenant_id"],
                workspace_id=r["workspace_id"],
                knowledge_base_id=r["knowledge_base_id"],
                type="page",
                title=r["title"],
                status="",
                deleted_at=None,
                current_version_id=r["version_id"],
                meta=r["meta"] or {},
                tags=list(r["tags"] or []),
                created_at=r["created_at"],
                updated_at=r["updated_at"],
            )
            chunk = SimpleNamespace(
                id=r["id"],
                version_id=r["version_id"],
                ordinal=r["ordinal"],
                heading_path=list(r["heading_path"] or []),
                content_text=r["content_text"],
                content_markdown=r["content_markdown"],
            )
            out.append(milvus_row(doc, chunk, access.get(r["document_id"])))  # type: ignore[arg-type]
        cursor = rows[-1]["id"]
        if len(access) > 200_000:  # bound memory on huge instances; re-fetching is cheap
            access.clear()
        yield out, cursor


def _prefetch(it: Iterator[Any], depth: int = 2) -> Iterator[Any]:
    """Run ``it`` in a thread ``depth`` items ahead: PostgreSQL reads and row building overlap
    Milvus' insert (which is mostly waiting for the embedding service)."""
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def run() -> None:
        try:
            for item in it:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.5)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(done)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
            q.put(exc)

    t = threading.Thread(target=run, name="rebuild-reader", daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


# --- catch-up, health ------------------------------------------------------------------------------

# Edited since, or indexed since (``index_checked_at``): a page that was not edited but whose
# index job ran while another collection was active (a retried or reconciled job, a worker that
# lagged behind) went only to that collection, and a rollback must carry it back too.
_CHANGED_SQL = text("""
SELECT d.id::text FROM documents d JOIN knowledge_bases k ON k.id = d.knowledge_base_id
WHERE d.updated_at >= :since OR k.updated_at >= :since OR d.index_checked_at >= :since
UNION
SELECT DISTINCT c.document_id::text FROM document_chunks c WHERE c.created_at >= :since
""")


def catch_up(ctx: AppContext, target: Target, since: datetime) -> SyncReport:
    """Re-sync into ``target`` every document (or document of a knowledge base) changed since."""
    with Session(ctx.engine) as s:
        ids = [r[0] for r in s.execute(_CHANGED_SQL, {"since": since}).all()]
    total = SyncReport()
    for start in range(0, len(ids), 500):
        with session_scope(ctx.engine) as s:
            total.add(sync_documents(ctx, s, ids[start : start + 500], targets=[target], mark_status=False))
    return total


@dataclass
class Health:
    ok: bool
    milvus_rows: int
    pg_chunks: int
    samples: list[dict[str, Any]]
    repaired: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "milvus_rows": self.milvus_rows,
            "pg_chunks": self.pg_chunks,
            "samples": self.samples,
            "repaired": self.repaired,
        }


# A sample must have text to search by: a chunk of a word or two ("a", "OK") may be only stop
# words to a profile's analyzer, so a text-only (BM25) collection rightly finds nothing for it,
# and counting that as a failure failed whole rebuilds at random.
SAMPLE_MIN_CHARS = 16
_SAMPLE_SQL = text("""
SELECT c.id::text, c.content_text FROM document_chunks c
JOIN documents d ON d.id = c.document_id AND d.current_version_id = c.version_id
WHERE d.type = 'page' AND d.status <> 'deleted' AND d.deleted_at IS NULL
  AND char_length(c.content_text) >= :min_chars AND c.id >= CAST(:after AS uuid)
ORDER BY c.id LIMIT 1
""")


def sample_chunk(session: Session, after: uuid.UUID) -> Any:
    """The first current page chunk at or after ``after`` (a random id for a random pick) with
    enough text to search by (``SAMPLE_MIN_CHARS``); ``None`` past the last one."""
    return session.execute(_SAMPLE_SQL, {"min_chars": SAMPLE_MIN_CHARS, "after": str(after)}).first()


def health_check(
    ctx: AppContext, collection: str, spec: ProfileSpec, *, samples: int = 3, repair: bool = True
) -> Health:
    """Row count equals PostgreSQL's (an id diff repairs a difference first) and sample searches
    of real chunk text return results (the chunk itself is expected among the first ten)."""
    client = ctx.milvus
    flush_collection(ctx, collection)
    with Session(ctx.engine) as s:
        pg = pg_chunk_count(s)
    rows = mv.count_rows(client, collection)
    repaired = None
    if rows != pg and repair:
        from openkb.indexing.verify import verify

        with session_scope(ctx.engine) as s:
            repaired = verify(ctx, s, Principal.system(), collection=collection, repair=True)
        flush_collection(ctx, collection)
        with Session(ctx.engine) as s:
            pg = pg_chunk_count(s)
        rows = mv.count_rows(client, collection)
    out: list[dict[str, Any]] = []
    with Session(ctx.engine) as s:
        picks = [sample_chunk(s, uuid.uuid4()) for _ in range(samples if pg else 0)]
    for pick in picks:
        if pick is None:
            continue
        cid, content = pick
        query = " ".join(content.split()[:12])[:200] or content[:50]
        hits = mv.hybrid_search(client, collection, query, "", 10, spec, output_fields=("chunk_id",))
        out.append(
            {
                "chunk_id": cid,
                "query": query[:80],
                "results": len(hits),
                "found_itself": any(h.chunk_id == cid for h in hits),
            }
        )
    ok = rows == pg and all(x["results"] > 0 for x in out)
    return Health(ok=ok, milvus_rows=rows, pg_chunks=pg, samples=out, repaired=repaired)


# --- the runner --------------------------------------------------------------------------------------


def run_rebuild(
    ctx: AppContext,
    job_id: uuid.UUID,
    *,
    batch_size: int = BATCH_SIZE,
    on_progress: Progress | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> IndexRebuildJob:
    """Run or resume a job to the end (see the module docstring). Raises on failure after
    marking the job ``failed`` (a re-run resumes it)."""
    lock = _RunLock(ctx, job_id)
    phase = on_phase or (lambda _p: None)
    try:
        with session_scope(ctx.engine) as s:
            job = get_job(s, job_id)
            if job.status == "succeeded":
                return job
            prof = s.get(MilvusIndexProfile, job.profile_id) if job.profile_id else None
            if prof is None:
                raise NotFound(f"the profile of rebuild {job.id} no longer exists")
            spec, profile_id = spec_of(prof), prof.id
            resumed = job.last_chunk_id is not None
            job.status, job.error, job.finished_at = "running", None, None
            if prof.status not in ("active", "deprecated"):
                prof.status = "building"  # also a ready or dropped profile being rebuilt
            s.add(job)
            s.add(prof)
        started_at = job.started_at
        collection, client = job.target_collection, ctx.milvus
        try:
            phase("create collection")
            if not resumed and client.has_collection(collection):
                # a fresh job builds from scratch: rows left by an earlier build would be duplicated
                drop_collection(ctx, collection)
            mv.ensure_collection(client, spec)
            with Session(ctx.engine) as s:
                total = pg_chunk_count(s)
            _update_job(ctx, job_id, total_chunks=total)
            phase("insert")
            processed = job.processed_chunks if resumed else 0
            after = str(job.last_chunk_id) if job.last_chunk_id else None
            if after == ALL_STREAMED:
                after = None  # a previous run streamed everything; the catch-up redoes the tail
                processed = total
            else:
                since_flush = 0
                first = True
                for rows, last in _prefetch(stream_rows(ctx, after, batch_size)):
                    if first and resumed:
                        mv.upsert_rows(client, collection, rows, batch_size=len(rows), flush=False)
                    else:
                        client.insert(collection, mv.with_lexical(client, collection, rows))
                    first = False
                    processed += len(rows)
                    since_flush += len(rows)
                    if since_flush >= FLUSH_EVERY:
                        flush_collection(ctx, collection)
                        since_flush = 0
                    _update_job(ctx, job_id, processed_chunks=processed, last_chunk_id=uuid.UUID(last))
                    if on_progress:
                        on_progress(processed, max(total, processed))
            flush_collection(ctx, collection)
            _update_job(ctx, job_id, last_chunk_id=uuid.UUID(ALL_STREAMED), processed_chunks=processed)
            phase("catch up")
            catch_up(ctx, Target(collection, spec), started_at - CATCH_UP_MARGIN)
            phase("compact")
            flush_collection(ctx, collection)
            mv.compact(client, collection)
            phase("load and warm")
            mv.warm(client, collection, spec)
            phase("health check")
            health = health_check(ctx, collection, spec)
            if not health.ok:
                raise IndexError_(f"health check of {collection} failed: {health.as_dict()}")
            if job.switch_on_success:
                phase("switch alias")
            with session_scope(ctx.engine) as s:  # switch, job, profile and audit commit together
                done_job, p = get_job(s, job_id), s.get(MilvusIndexProfile, profile_id)
                if job.switch_on_success:
                    do_switch(ctx, s, p, since=None, actor=None, why=f"rebuild {job_id}")
                elif p is not None and p.status in ("building", "failed", "dropped"):
                    p.status = "ready"  # rebuilt and healthy: `index switch` may activate it
                    s.add(p)
                done_job.status, done_job.finished_at, done_job.error = "succeeded", datetime.now(UTC), None
                s.add(done_job)
                audit_index(
                    s,
                    None,
                    "milvus.rebuild.finish",
                    job_id=str(job_id),
                    collection=collection,
                    status="succeeded",
                    processed=processed,
                    started_by=job.started_by,
                )
            log.info("rebuild %s of %s done: %d chunks, health %s", job_id, collection, processed, health.as_dict())
        except BaseException as exc:
            detail = exc.detail if isinstance(exc, OpenKBError) else f"{type(exc).__name__}: {exc}"
            if isinstance(exc, KeyboardInterrupt):
                detail = "interrupted"
            _update_job(ctx, job_id, status="failed", finished_at=datetime.now(UTC), error=str(detail)[:4000])
            with session_scope(ctx.engine) as s:
                p = s.get(MilvusIndexProfile, profile_id)
                if p is not None and p.status == "building":
                    p.status = "failed"
                    s.add(p)
                audit_index(
                    s,
                    None,
                    "milvus.rebuild.finish",
                    job_id=str(job_id),
                    collection=collection,
                    status="failed",
                    error=str(detail)[:500],
                    started_by=job.started_by,
                )
            if isinstance(exc, (OpenKBError, KeyboardInterrupt, SystemExit)):
                raise
            raise IndexError_(f"rebuild {job_id} failed: {detail}") from exc
    finally:
        lock.release()
    with Session(ctx.engine) as s:
        return get_job(s, job_id)


# --- switch, rollback, drop, history -------------------------------------------------------------------


def do_switch(
    ctx: AppContext,
    session: Session,
    profile: MilvusIndexProfile | None,
    *,
    since: datetime | None,
    actor: Principal | None,
    kind: str = "switch",
    reverts: Any = None,
    why: str = "",
) -> dict[str, Any]:
    """Point the active alias at ``profile``'s collection and record the move in the history
    (same transaction as the profile statuses). ``since``: re-sync edits made after that time
    first (they reached only the collection that was active then)."""
    if profile is None:
        raise NotFound("no such profile")
    client, alias = ctx.milvus, ctx.settings.milvus_active_alias
    lock_alias(session, alias)
    spec = spec_of(profile)
    if not client.has_collection(profile.collection_name):
        raise Conflict(f"collection {profile.collection_name} does not exist; rebuild profile {profile.name}")
    caught: dict[str, Any] | None = None
    t0 = datetime.now(UTC)
    if since is not None:
        caught = catch_up(ctx, Target(profile.collection_name, spec), since).as_dict()
    client.load_collection(profile.collection_name)
    previous = point_alias(client, alias, profile.collection_name)
    mark_active(session, profile, alias)
    row = record_switch(
        session,
        alias=alias,
        from_collection=previous,
        to_collection=profile.collection_name,
        kind=kind,
        actor=actor,
        reverts=reverts,
    )
    if since is not None:  # edits between the catch-up and the switch
        catch_up(ctx, Target(profile.collection_name, spec), t0 - timedelta(seconds=5))
    forget_active_profile()
    log.info("alias %s: %s -> %s (%s%s)", alias, previous, profile.collection_name, kind, f", {why}" if why else "")
    out = {
        "alias": alias,
        "previous": previous,
        "collection": profile.collection_name,
        "profile": profile.name,
        "history_id": row.id,
        "caught_up": caught,
    }
    audit_index(
        session,
        actor,
        f"milvus.alias.{kind}",
        **{k: v for k, v in out.items() if k != "caught_up"},
        **({"reason": why} if why else {}),
    )
    return out


def switch(
    ctx: AppContext, session: Session, principal: Principal, profile_ref: str, *, force: bool = False
) -> dict[str, Any]:
    """``openkb index switch``: to a collection whose last rebuild succeeded (or ``force``)."""
    authorize_operator(session, principal)
    prof = get_profile(session, profile_ref)
    active = current_target(ctx.milvus, ctx.settings.milvus_active_alias)
    if prof.collection_name == active:
        return {
            "alias": ctx.settings.milvus_active_alias,
            "previous": active,
            "collection": active,
            "profile": prof.name,
            "unchanged": True,
        }
    job = session.exec(
        select(IndexRebuildJob)
        .where(IndexRebuildJob.target_collection == prof.collection_name)
        .order_by(col(IndexRebuildJob.started_at).desc())
    ).first()
    if not force and (job is None or job.status != "succeeded"):
        raise ValidationError(
            f"profile {prof.name} has no successful rebuild (last: "
            f"{job.status if job else 'none'}); run `openkb index rebuild --profile {prof.name}` "
            "or pass --force"
        )
    since = (job.finished_at if job and job.finished_at else prof.created_at) - CATCH_UP_MARGIN
    deact = (prof.function_metadata or {}).get("deactivated_at_ms")
    if deact:
        since = min(since, datetime.fromtimestamp(deact / 1000, UTC) - CATCH_UP_MARGIN)
    return do_switch(ctx, session, prof, since=since, actor=principal)


def rollback(ctx: AppContext, session: Session, principal: Principal, to: str | None = None) -> dict[str, Any]:
    """Back to the collection that was active before the last switch not yet undone (see
    ``openkb.indexing.history`` for the undo-stack semantics: a second rollback goes one step
    further back, never forward). ``to``: jump to that profile instead (recorded as a switch).
    Edits made since the target stopped being active are synced into it first."""
    authorize_operator(session, principal)
    alias = ctx.settings.milvus_active_alias
    lock_alias(session, alias)
    current_coll = current_target(ctx.milvus, alias)
    current = find_by_collection(session, current_coll)
    undo = None
    if to is not None:
        target = get_profile(session, to)
        kind = "switch"
    else:
        plan = plan_rollback(session, alias, current_coll)
        if plan.target is None:
            raise Conflict(plan.reason)
        found = find_by_collection(session, plan.target)
        if found is None or not ctx.milvus.has_collection(plan.target):
            raise Conflict(
                f"cannot roll back to {plan.target}: its collection was dropped (see `openkb index "
                "history`); rebuild its profile or use `rollback --to PROFILE`"
            )
        target, undo, kind = found, plan.undo, "rollback"
    if current is not None and target.id == current.id:
        raise Conflict(f"{target.name} is already active")
    left = undo.created_at if undo is not None else None
    deact = (target.function_metadata or {}).get("deactivated_at_ms")
    if left is None and deact:
        left = datetime.fromtimestamp(deact / 1000, UTC)
    if left is None:
        left = current.activated_at if current and current.activated_at else datetime.now(UTC)
    return do_switch(ctx, session, target, since=left - CATCH_UP_MARGIN, actor=principal, kind=kind, reverts=undo)


def drop(ctx: AppContext, session: Session, principal: Principal, ref: str, *, force: bool = False) -> dict[str, Any]:
    """Drop a collection; its profile is kept with status ``dropped`` so a later
    ``rebuild --profile`` can recreate it. Refuses (``CONFLICT``) the active collection always,
    and the rollback target (where ``index rollback`` would return) unless ``force``: dropping it
    silently turns the next rollback into an error."""
    authorize_operator(session, principal)
    prof = get_profile(session, ref)
    alias = ctx.settings.milvus_active_alias
    lock_alias(session, alias)
    active = current_target(ctx.milvus, alias)
    if prof.collection_name == active:
        raise Conflict(
            f"{prof.collection_name} is the active collection; switch or roll back first "
            "(--force does not apply to the active collection)"
        )
    if not force and prof.collection_name == rollback_target(session, alias, active):
        raise Conflict(
            f"{prof.collection_name} is the rollback target (`openkb index rollback` returns to it); "
            "pass --force to drop it anyway"
        )
    running = session.exec(
        select(IndexRebuildJob).where(
            IndexRebuildJob.target_collection == prof.collection_name, IndexRebuildJob.status == "running"
        )
    ).first()
    if running is not None and is_alive(ctx, running.id):
        raise RebuildBusy(f"a rebuild of {prof.collection_name} is running (job {running.id})")
    existed = ctx.milvus.has_collection(prof.collection_name)
    if existed:
        drop_collection(ctx, prof.collection_name)
    meta = dict(prof.function_metadata)
    meta["dropped_at"] = datetime.now(UTC).isoformat()
    prof.function_metadata = meta
    prof.status = "dropped"
    prof.alias = ""
    session.add(prof)
    for job in session.exec(
        select(IndexRebuildJob).where(
            IndexRebuildJob.target_collection == prof.collection_name, col(IndexRebuildJob.status).in_(LIVE_STATUSES)
        )
    ).all():
        job.status = "cancelled"
        session.add(job)
    session.flush()
    out = {"dropped": prof.collection_name, "existed": existed, "profile": prof.name, "forced": force}
    audit_index(session, principal, "milvus.collection.drop", **out)
    return out


def history(ctx: AppContext, session: Session, principal: Principal, *, limit: int = 50) -> dict[str, Any]:
    """``openkb index history``: the alias' switches, newest first, and where a rollback would go."""
    authorize_operator(session, principal)
    alias = ctx.settings.milvus_active_alias
    current = current_target(ctx.milvus, alias)
    plan = plan_rollback(session, alias, current)
    return {
        "alias": alias,
        "collection": current,
        "rollback_target": plan.target,
        "rollback_refused": plan.reason or None,
        "items": [history_view(r) for r in list_history(session, alias, limit=limit)],
    }


__all__ = [
    "RebuildBusy",
    "catch_up",
    "do_switch",
    "drop",
    "find_by_collection",
    "get_job",
    "health_check",
    "history",
    "list_jobs",
    "rebuild_view",
    "rollback",
    "run_rebuild",
    "start_rebuild",
    "switch",
]
