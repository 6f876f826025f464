"""Import jobs: ``POST /api/import-jobs`` stores the upload and a job; a worker runs the import.

The request is authorized when it is made (the caller must be able to create documents in the
target: an outsider hears 404, a reader 403) and the upload — one file, several files (packed
into one zip, their relative names kept, so a dropped folder keeps its tree) or a zip — is kept as
the job's source asset. The worker (``run_import_job``, the ``import_job`` job) runs the same
pipeline as ``openkb import`` as the job's creator, so every write is checked again and recorded
in the job's run (``run_id``: revert it like any run).

Idempotent: a job that already finished is left alone; a retried or duplicated job re-runs the
pipeline, whose keyed upserts make that a no-op for what already committed. Keys are those of the
CLI (``import:<target>:<path>``), so importing the same files again, by either door, updates in
place.

Visibility: a job is seen by its creator only (it names files and folders of the upload, which
the folder's other readers may not be meant to see before they become documents).
"""

from __future__ import annotations

import io
import time
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, BinaryIO

from sqlmodel import Session

from openkb.assets import upload_asset
from openkb.config import Settings, get_settings
from openkb.content import limits, tree
from openkb.content.actor import Actor
from openkb.errors import NotFound, PermissionDenied, ValidationError
from openkb.importing.openkb_export import run_any
from openkb.importing.pipeline import Progress, Units
from openkb.importing.sources import is_archive, source_from_bytes
from openkb.jobs import enqueue_after_commit
from openkb.models import DocumentAsset, ImportJob
from openkb.models._base import utcnow
from openkb.permissions import Action, KbAction, Principal, access_knowledge_base
from openkb.storage import BlobStore

__all__ = ["JOB_HANDLERS", "create_import_job", "get_import_job", "job_out", "run_import_job"]

MAX_FILES = 10_000


def create_import_job(
    session: Session,
    actor: Actor,
    blobs: BlobStore,
    *,
    knowledge_base_id: uuid.UUID,
    files: list[tuple[str, BinaryIO]],
    target_id: uuid.UUID | None = None,
    settings: Settings | None = None,
) -> ImportJob:
    """``files``: (relative name, stream). One zip is imported as its tree; several files are packed."""
    settings = settings or get_settings()
    p = actor.principal
    if not files:
        raise ValidationError("send at least one file (field 'file')", field="file")
    if len(files) > MAX_FILES:
        raise ValidationError(f"at most {MAX_FILES} files per import", field="file")
    kb_acc = access_knowledge_base(session, p, knowledge_base_id)
    parent = tree.target_parent(session, p, knowledge_base_id, target_id)
    if parent is None:
        kb_acc.require(KbAction.CREATE, message="not allowed to create documents here")
    else:
        parent.require(Action.CREATE_CHILD, message="not allowed to create documents in this folder")
    if not p.has_write_scope():
        raise PermissionDenied("this token may not import (it needs doc:write)")
    name, data, mime = _pack(files, settings.max_upload_bytes)
    asset = upload_asset(
        session, actor, blobs, io.BytesIO(data), size=len(data), filename=name, content_type=mime, settings=settings
    )
    kb = kb_acc.knowledge_base
    job = ImportJob(
        tenant_id=kb.tenant_id,
        workspace_id=kb.workspace_id,
        knowledge_base_id=kb.id,
        source_asset_id=asset.id,
        status="pending",
        converter="auto",
        target_id=target_id,
        run_id=actor.run_id,
        created_by=actor.user_id,
        results={},
    )
    session.add(job)
    session.flush()
    enqueue_after_commit(session, "import_job", job_id=str(job.id))
    return job


def _pack(files: list[tuple[str, BinaryIO]], cap: int) -> tuple[str, bytes, str]:
    def read(name: str, f: BinaryIO) -> bytes:
        data = f.read(cap + 1)
        if len(data) > cap:
            raise limits.UploadTooLarge(f"{name} is larger than {cap} bytes", limit="max_upload_bytes", max=cap)
        return data

    if len(files) == 1:
        name, f = files[0]
        base = name.replace("\\", "/").strip("/").rsplit("/", 1)[-1] or "upload"
        data = read(name, f)
        # a .zip that is not one is refused here, with the upload, not later by the job
        return base, data, "application/zip" if is_archive(data[:4], base) else "application/octet-stream"
    buf = io.BytesIO()
    total = 0
    seen: set[str] = set()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, f in files:
            rel = name.replace("\\", "/").strip("/") or "upload"
            if rel in seen:
                raise ValidationError(f"two files are named {rel!r}", field="file")
            seen.add(rel)
            data = read(rel, f)
            total += len(data)
            if total > cap:
                raise limits.UploadTooLarge(
                    f"the files are larger than {cap} bytes together", limit="max_upload_bytes", max=cap
                )
            z.writestr(rel, data)  # names with ".." fail per file in the import, like any zip
    return "upload.zip", buf.getvalue(), "application/zip"


def get_import_job(session: Session, principal: Principal, job_id: uuid.UUID) -> ImportJob:
    """The job for its creator; NotFound for anyone else (existence stays private)."""
    job = session.get(ImportJob, job_id)
    if (
        job is None
        or principal.kind != "user"
        or principal.user_id != job.created_by
        or principal.tenant_id != job.tenant_id
    ):
        raise NotFound("import job not found")
    return job


def job_out(job: ImportJob) -> dict[str, Any]:
    r = job.results or {}
    return {
        "id": job.id,
        "status": job.status,
        "knowledge_base_id": job.knowledge_base_id,
        "target_id": job.target_id,
        "run_id": job.run_id,
        "source_asset_id": job.source_asset_id,
        "error": job.error,
        "warnings": list(job.warnings or []),
        "progress": r.get("progress"),
        "counts": r.get("counts", {}),
        "files": r.get("files", []),
        "document_ids": r.get("document_ids", []),
        "document_id": job.document_id,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
    }


def run_import_job(
    units: Units, blobs: BlobStore, job_id: uuid.UUID, settings: Settings | None = None, jobs: int = 1
) -> str:
    """Run one job to its end; returns its final status. Each step commits on its own."""
    settings = settings or get_settings()
    with units() as s:
        job = s.get(ImportJob, job_id, with_for_update=True)
        if job is None:
            return "missing"
        if job.status in ("succeeded", "failed"):
            return job.status
        job.status, job.updated_at = "running", utcnow()
        s.add(job)
        asset = s.get(DocumentAsset, job.source_asset_id) if job.source_asset_id else None  # pruned
        key = asset.object_key if asset else None
        name = asset.filename if asset and asset.filename else "upload"
        actor = Actor.of(
            Principal.user(job.created_by, job.tenant_id), str(job.run_id) if job.run_id else None, source="import"
        )
        kb_id, target_id = job.knowledge_base_id, job.target_id
    try:
        if key is None:
            raise NotFound("the job's upload is gone")
        data = b"".join(blobs.open(key))
        source = source_from_bytes(data, name, settings.max_upload_bytes)
        try:
            report = run_any(
                units,
                blobs,
                actor,
                kb_id,
                source,
                target_id=target_id,
                jobs=jobs,
                settings=settings,
                progress=_progress_writer(units, job_id),
            )
        finally:
            source.close()
    except Exception as exc:  # noqa: BLE001 - the job records why it failed, whatever it was
        detail = getattr(exc, "detail", None) or f"{type(exc).__name__}: {exc}"
        _finish(units, job_id, "failed", error=str(detail)[:2000])
        return "failed"
    failed = report.failed
    pages = [f for f in report.files if f.type == "page" and f.document_id and f.status != "failed"]
    _finish(
        units,
        job_id,
        "failed" if failed else "succeeded",
        error=f"{len(failed)} of {len(report.files)} files failed" if failed else None,
        warnings=[f"{f.path}: {w}" for f in report.files for w in f.warnings][:1000],
        results={"counts": report.counts(), "files": report.to_dict()["files"], "document_ids": report.document_ids()},
        document_id=uuid.UUID(pages[0].document_id) if len(pages) == 1 else None,
    )
    return "failed" if failed else "succeeded"


def _progress_writer(units: Units, job_id: uuid.UUID, every: float = 0.5) -> Callable[[Progress], None]:
    """The pipeline's progress, kept in the job (``results.progress``: phase, done, total, the
    current file; ``results.files``: the files written so far) for ``GET /api/import-jobs/:id``
    — the web app's live per-file view. Written
    in a unit of work of its own, at most every ``every`` seconds and at each phase's start
    and end, so a big import does not pay a commit per file."""
    last: dict[str, Any] = {"at": 0.0, "phase": None}

    def write(p: Progress) -> None:
        now = time.monotonic()
        edge = p.phase != last["phase"] or p.done + 1 >= p.total
        if not edge and now - last["at"] < every:
            return
        last["at"], last["phase"] = now, p.phase
        done = min(p.done + 1 if p.phase == "prepare" else p.done, p.total)  # see Progress
        state = {"phase": p.phase, "done": done, "total": p.total, "current": p.current}
        # the files written so far, in the final shape: the web app lists them as they come
        files = [asdict(f) for f in p.report.files] if p.report is not None else None
        with units() as s:
            job = s.get(ImportJob, job_id, with_for_update=True)
            if job is not None and job.status == "running":
                job.results = {**(job.results or {}), "progress": state, **({"files": files} if files else {})}
                job.updated_at = utcnow()
                s.add(job)

    return write


def _finish(
    units: Units,
    job_id: uuid.UUID,
    status: str,
    *,
    error: str | None = None,
    warnings: list[str] | None = None,
    results: dict[str, Any] | None = None,
    document_id: uuid.UUID | None = None,
) -> None:
    with units() as s:
        job = s.get(ImportJob, job_id, with_for_update=True)
        if job is None:
            return
        job.status, job.error, job.updated_at = status, error, utcnow()
        if warnings is not None:
            job.warnings = warnings
        if results is not None:
            job.results = results
        if document_id is not None:
            job.document_id = document_id
        s.add(job)


def _handle_import_job(ctx: Any, session: Session, *, job_id: str) -> str:
    """Worker handler (``fn(ctx, session, **kwargs)``): the pipeline commits per file, so it gets
    its own units of work on the context's engine instead of the handler's one session."""
    from openkb.db import session_scope

    def units() -> Any:
        return session_scope(ctx.engine)

    return run_import_job(units, ctx.blobs, uuid.UUID(job_id), ctx.settings)


JOB_HANDLERS = {"import_job": _handle_import_job}
