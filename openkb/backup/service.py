"""Create and restore a backup archive (docs/operations.md#backup-and-restore).

Consistency: the dump and the list of blobs come from one PostgreSQL snapshot. A REPEATABLE READ
transaction exports its snapshot, ``pg_dump --snapshot`` dumps exactly that state, and the same
transaction lists the asset keys, so every asset row in the dump has its blob in the archive
(blobs are immutable under a fresh key; a blob deleted between the snapshot and the copy is
recorded as missing in the manifest, not silently dropped). Nothing is locked: the appliance
keeps serving while a backup runs.

Restore never merges: the database must have no tables and the blob store no assets
(``RestoreTargetNotEmpty``). Every file's SHA-256 is checked before anything is written. Milvus
is derived data and not in the archive: after the load, the active profile's collection is
rebuilt from PostgreSQL's chunks by the ordinary rebuild service (``openkb.indexing.rebuild``),
which points the alias at it. The trap: rebuild jobs copied from the source still carry its
progress (``last_chunk_id``); resumed here they would skip chunks, so they are closed as
cancelled first and the restore runs a fresh job.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import psycopg
from sqlalchemy import text
from sqlmodel import col, select

from openkb import __version__
from openkb.backup.pgtools import libpq_url, pg_tool
from openkb.context import AppContext
from openkb.db import session_scope
from openkb.errors import (
    BackupChecksumMismatch,
    BackupFileUnavailable,
    BackupInvalid,
    OpenKBError,
    RestoreTargetNotEmpty,
)
from openkb.models import IndexRebuildJob, MilvusIndexProfile

FORMAT = "openkb-backup/1"
MANIFEST = "manifest.json"
DUMP = "postgresql.dump"

Step = Callable[[str], None]
Progress = Callable[[int, int], None]

# What the manifest counts (and a round-trip compares): the tables a user would miss.
COUNTED = (
    "users",
    "workspaces",
    "knowledge_bases",
    "documents",
    "document_versions",
    "document_chunks",
    "document_assets",
    "share_links",
    "mcp_personal_access_tokens",
    "collaborators",
    "milvus_index_profiles",
)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _server_major(conn: psycopg.Connection[Any]) -> tuple[int, str]:
    num = int(conn.execute("SHOW server_version_num").fetchone()[0])  # type: ignore[index]
    version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
    return num // 10000, version


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).split())[-400:]
        raise OpenKBError(f"{what} failed (exit {done.returncode}): {tail}")


def _counts(conn: psycopg.Connection[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for table in COUNTED:
        if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0]:  # type: ignore[index]
            out[table] = int(conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])  # type: ignore[index]
    return out


def create_backup(
    ctx: AppContext, dest: Path, *, on_step: Step | None = None, on_progress: Progress | None = None
) -> dict[str, Any]:
    """Write ``dest`` (a tar archive, refused if it exists) and return its manifest."""
    step = on_step or (lambda _s: None)
    dest = dest.expanduser().resolve()
    if dest.exists():
        raise BackupInvalid(f"{dest} already exists: choose a new file name")
    if not dest.parent.is_dir():
        raise BackupFileUnavailable(f"cannot write the backup in {dest.parent}: no such directory")
    try:
        work = Path(tempfile.mkdtemp(prefix=".openkb-backup-", dir=dest.parent))
    except OSError as exc:  # read-only, not ours, a pseudo file system
        raise BackupFileUnavailable(f"cannot write the backup in {dest.parent}: {exc.strerror or exc}") from None
    url = libpq_url(ctx.endpoints.database_url)
    try:
        step("snapshot")
        with psycopg.connect(url) as conn:
            major, server_version = _server_major(conn)
            pg_dump, dump_version = pg_tool("pg_dump", major)
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            snapshot = conn.execute("SELECT pg_export_snapshot()").fetchone()[0]  # type: ignore[index]
            step("database dump")
            _run(
                [
                    pg_dump,
                    "--format=custom",
                    "--no-owner",
                    "--no-privileges",
                    f"--snapshot={snapshot}",
                    f"--file={work / DUMP}",
                    f"--dbname={url}",
                ],
                "pg_dump",
            )
            revision = conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]  # type: ignore[index]
            assets = conn.execute(
                # one file per blob: rows with the same bytes share one (openkb/assets.py)
                "SELECT object_key, max(size_bytes), max(sha256) FROM document_assets GROUP BY object_key "
                "ORDER BY object_key"
            ).fetchall()
            profiles = [
                dict(zip(("name", "collection", "status", "vector_dim"), r, strict=True))
                for r in conn.execute(
                    "SELECT name, collection_name, status, vector_dim FROM milvus_index_profiles ORDER BY created_at"
                ).fetchall()
            ]
            counts = _counts(conn)
            conn.rollback()
        step("assets")
        missing: list[str] = []
        for i, (key, _size, _digest) in enumerate(assets, 1):
            rel = PurePosixPath("blobs") / key
            target = work / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with open(target, "wb") as out:
                    out.writelines(ctx.blobs.open(key))
            except OpenKBError:
                target.unlink(missing_ok=True)
                missing.append(key)
            if on_progress:
                on_progress(i, len(assets))
        files = {
            str(p.relative_to(work).as_posix()): {"size": p.stat().st_size, "sha256": _sha256(p)}
            for p in sorted(work.rglob("*"))
            if p.is_file()
        }
        manifest = {
            "format": FORMAT,
            "openkb_version": __version__,
            "created_at": datetime.now(UTC).isoformat(),
            "schema_revision": revision,
            "postgresql": {"server_version": server_version, "dump_tool": dump_version},
            "sources": {
                c: ("embedded" if ctx.settings.embedded(c) else "external") for c in ("postgresql", "blobs", "milvus")
            },
            "blob_store": ctx.blobs.kind,
            "index": {"alias": ctx.settings.milvus_active_alias, "profiles": profiles},
            "counts": counts,
            "assets": len(assets),
            "missing_assets": missing,
            "files": files,
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2, default=str))
        step("archive")
        _write_archive(work, [MANIFEST, *files], dest)
        return {**manifest, "path": str(dest), "bytes": dest.stat().st_size}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _write_archive(work: Path, members: list[str], dest: Path) -> None:
    """Tar ``members`` of ``work`` into ``dest`` through ``dest.partial``, readable by its owner
    only: the archive holds every page and the password and token hashes (an export is 0600
    too). Whatever stops the write, a Ctrl-C included, takes the partial file with it; a re-run
    starts from nothing."""
    partial = dest.with_name(dest.name + ".partial")
    partial.unlink(missing_ok=True)  # a partial of a run killed with -9 (its mode may be older)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f, tarfile.open(fileobj=f, mode="w") as tar:
            for rel in members:
                tar.add(work / rel, arcname=rel)
        partial.replace(dest)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def read_archive(src: Path, into: Path) -> dict[str, Any]:
    """Unpack ``src`` into ``into`` and verify it against its manifest; returns the manifest."""
    src = src.expanduser()
    if not src.is_file():
        why = "no such file" if not src.exists() else "not a file"
        raise BackupFileUnavailable(f"cannot read {src}: {why}")
    try:
        with tarfile.open(src, "r") as tar:
            for m in tar.getmembers():
                p = PurePosixPath(m.name)
                if p.is_absolute() or ".." in p.parts or not (m.isfile() or m.isdir()):
                    raise BackupInvalid(f"{src}: member {m.name!r} is not a plain file inside the archive")
            tar.extractall(into, filter="data")
    except PermissionError as exc:  # the file, not its content: no right to read it
        raise BackupFileUnavailable(f"cannot read {src}: {exc.strerror or exc}") from None
    except (tarfile.TarError, OSError, EOFError) as exc:
        # tarfile's message for a file of no known compression is one line per method tried
        why = str(exc).splitlines()[0].rstrip(" :(") if str(exc).strip() else type(exc).__name__
        raise BackupInvalid(f"{src} is not an OpenKB backup archive ({why})") from None
    try:
        manifest = json.loads((into / MANIFEST).read_text())
    except (OSError, ValueError):
        raise BackupInvalid(f"{src} has no readable {MANIFEST}: not an OpenKB backup archive") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupInvalid(
            f"{src}: unknown backup format {manifest.get('format') if isinstance(manifest, dict) else None!r} "
            f"(this OpenKB reads {FORMAT})"
        )
    files: dict[str, dict[str, Any]] = manifest.get("files") or {}
    if DUMP not in files:
        raise BackupInvalid(f"{src}: the manifest lists no {DUMP}")
    present = {p.relative_to(into).as_posix() for p in into.rglob("*") if p.is_file()} - {MANIFEST}
    if extra := sorted(present - set(files)):
        raise BackupChecksumMismatch(f"{src}: {extra[0]} is in the archive but not in its manifest")
    for rel, want in files.items():
        path = into / rel
        if not path.is_file():
            raise BackupChecksumMismatch(f"{src}: {rel} is listed in the manifest but missing")
        if path.stat().st_size != want.get("size") or _sha256(path) != want.get("sha256"):
            raise BackupChecksumMismatch(f"{src}: {rel} does not match its manifest checksum (damaged or altered)")
    return manifest


def _assert_empty(ctx: AppContext, url: str) -> None:
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
        ).fetchone()[0]  # type: ignore[index]
    if tables:
        raise RestoreTargetNotEmpty(
            f"the target database already has {tables} tables: restore into an empty "
            "database (a new OPENKB_HOME, or a freshly created DATABASE_URL database)"
        )
    if ctx.blobs.has_objects():
        raise RestoreTargetNotEmpty(
            "the target blob store already holds assets: restore into an empty one "
            "(a new OPENKB_HOME, or an empty S3_BUCKET)"
        )


def restore_backup(
    ctx: AppContext,
    src: Path,
    *,
    on_step: Step | None = None,
    on_progress: Progress | None = None,
    rebuild_progress: Progress | None = None,
) -> dict[str, Any]:
    """Load ``src`` into the (empty) database and blob store of ``ctx``, then rebuild the index."""
    from openkb.indexing.rebuild import run_rebuild

    step = on_step or (lambda _s: None)
    url = libpq_url(ctx.endpoints.database_url)
    work = Path(tempfile.mkdtemp(prefix="openkb-restore-"))
    try:
        step("verify archive")
        manifest = read_archive(src, work)
        _assert_empty(ctx, url)
        step("database")
        with psycopg.connect(url) as conn:
            major, _ = _server_major(conn)
        pg_restore, _ = pg_tool("pg_restore", major)
        _run(
            [
                pg_restore,
                "--no-owner",
                "--no-privileges",
                "--single-transaction",
                "--exit-on-error",
                f"--dbname={url}",
                str(work / DUMP),
            ],
            "pg_restore",
        )
        # Counted before the rebuild: these are what the archive held. The rebuild then re-chunks
        # from the current versions, so document_chunks may legitimately differ afterwards (a page
        # saved but not yet indexed when the backup ran gets its chunks now).
        with psycopg.connect(url) as conn:
            counts = _counts(conn)
        step("assets")
        blob_files = sorted(rel for rel in manifest["files"] if rel.startswith("blobs/"))
        with session_scope(ctx.engine) as s:
            mimes = dict(s.execute(text("SELECT object_key, mime_type FROM document_assets")).all())
        for i, rel in enumerate(blob_files, 1):
            key = rel.removeprefix("blobs/")
            with open(work / rel, "rb") as f:
                ctx.blobs.put(key, f, mimes.get(key) or "application/octet-stream")
            if on_progress:
                on_progress(i, len(blob_files))
        step("index")
        with session_scope(ctx.engine) as s:
            for job in s.exec(
                select(IndexRebuildJob).where(col(IndexRebuildJob.status).in_(("pending", "running", "failed")))
            ).all():
                job.status, job.finished_at = "cancelled", datetime.now(UTC)
                job.error = "closed by openkb restore: progress of the backed-up installation"
                s.add(job)
            active = s.exec(select(MilvusIndexProfile).where(MilvusIndexProfile.status == "active")).first()
            job_id = None
            if active is not None:
                job = IndexRebuildJob(
                    id=uuid.uuid4(),
                    tenant_id=None,
                    profile_id=active.id,
                    target_collection=active.collection_name,
                    target_alias=ctx.settings.milvus_active_alias,
                    status="pending",
                    switch_on_success=True,
                    started_by=None,
                )
                s.add(job)
                job_id = job.id
        rebuilt = None
        if job_id is not None:
            done = run_rebuild(ctx, job_id, on_progress=rebuild_progress)
            rebuilt = {"collection": done.target_collection, "chunks": done.processed_chunks, "status": done.status}
        return {
            "source": str(src),
            "manifest": {k: manifest[k] for k in ("format", "openkb_version", "created_at", "schema_revision")},
            "counts": counts,
            "assets": len(blob_files),
            "rebuilt": rebuilt,
            "missing_assets": manifest.get("missing_assets") or [],
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
