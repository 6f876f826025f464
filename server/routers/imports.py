"""/api/import-jobs: import files, a folder's files or a zip into a knowledge base (docs/importing.md).

``POST`` takes multipart/form-data: one or more ``file`` parts (a part's filename may hold a
relative path, ``notes/a.md``, so a dropped folder keeps its tree), ``knowledge_base_id`` and an
optional ``parent_id`` (the folder to import into). It answers 202 with the pending job; a worker
runs it. ``GET /api/import-jobs/{id}`` is the job's status, per-file results, warnings and the
documents it wrote — for its creator (404 for anyone else).

The body is parsed here, with the size cut off while the bytes arrive (like /api/uploads), not by
FastAPI's form machinery; the JSON body limit does not apply to this path (server/body_limit.py).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from openkb.content import limits
from openkb.errors import DocumentInTrash, NotFound, PermissionDenied, ValidationError
from openkb.importing import job_list
from openkb.importing import jobs as import_jobs
from server.auth import PrincipalDep
from server.deps import CtxDep, SessionDep
from server.errors import errors_for
from server.routers.assets import MULTIPART_OVERHEAD, UnsupportedMedia, _limited
from server.routers.content import DocWriterDep

router = APIRouter(tags=["import"])

_FIELDS = ("file", "knowledge_base_id", "parent_id")


class FileResultOut(BaseModel):
    path: str
    status: str
    type: str
    document_id: uuid.UUID | None = None
    converter: str | None = None
    bytes: int = 0
    warnings: list[str] = []
    error: str | None = None
    code: str | None = None


class ImportProgressOut(BaseModel):
    phase: str  # prepare (reading and converting) | write (saving)
    done: int
    total: int
    current: str  # the file being worked on


class ImportJobOut(BaseModel):
    id: uuid.UUID
    status: str  # pending | running | succeeded | failed
    knowledge_base_id: uuid.UUID
    target_id: uuid.UUID | None
    run_id: uuid.UUID | None
    # the uploaded file; null once pruned after the retention (docs/operations.md#assets-without-a-document)
    source_asset_id: uuid.UUID | None
    error: str | None
    warnings: list[str]
    progress: ImportProgressOut | None = None  # while running; updated about twice a second
    counts: dict[str, int]
    files: list[FileResultOut]
    document_ids: list[uuid.UUID]
    document_id: uuid.UUID | None
    created_at: datetime
    updated_at: datetime


_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file", "knowledge_base_id"],
                    "properties": {
                        "file": {
                            "type": "array",
                            "items": {"type": "string", "format": "binary"},
                            "description": "one or more files (a filename may be a relative path), or one .zip",
                        },
                        "knowledge_base_id": {"type": "string", "format": "uuid"},
                        "parent_id": {"type": "string", "format": "uuid", "description": "folder to import into"},
                    },
                }
            }
        },
    }
}


def _uuid(form: Any, name: str, required: bool) -> uuid.UUID | None:
    raw = form.get(name)
    if not isinstance(raw, str) or not raw.strip():
        if required:
            raise ValidationError(f"the form needs a '{name}' field", field=name)
        return None
    try:
        return uuid.UUID(raw.strip())
    except ValueError:
        raise ValidationError(f"{name} must be a UUID", field=name) from None


@router.post(
    "/api/import-jobs",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=ImportJobOut,
    openapi_extra=_BODY,
    responses=errors_for(
        401, NotFound, PermissionDenied, DocumentInTrash, limits.UploadTooLarge, UnsupportedMedia, ValidationError
    ),
)
async def create_import_job(request: Request, session: SessionDep, actor: DocWriterDep, ctx: CtxDep) -> dict[str, Any]:
    """Queue an import; the caller must be able to create documents in the target."""
    limit = ctx.settings.max_upload_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit + MULTIPART_OVERHEAD:
        raise limits.UploadTooLarge(f"the upload is larger than {limit} bytes", limit="max_upload_bytes", max=limit)
    if not request.headers.get("content-type", "").lower().startswith("multipart/form-data"):
        raise UnsupportedMedia("send the files as multipart/form-data (field 'file')")
    try:
        form = await MultiPartParser(
            request.headers, _limited(request, limit), max_files=import_jobs.MAX_FILES, max_fields=10
        ).parse()
    except MultiPartException as exc:
        raise ValidationError(f"malformed multipart body: {exc.message}", field="file") from None
    try:
        unknown = sorted(k for k in form if k not in _FIELDS)
        if unknown:
            raise ValidationError(
                f"{unknown[0]}: unknown field, not accepted here; accepted fields: {', '.join(_FIELDS)}",
                field=unknown[0],
            )
        files = [(f.filename or "upload", f.file) for f in form.getlist("file") if isinstance(f, UploadFile)]
        kb_id = _uuid(form, "knowledge_base_id", True)
        parent_id = _uuid(form, "parent_id", False)
        job = await run_in_threadpool(
            import_jobs.create_import_job,
            session,
            actor,
            ctx.blobs,
            knowledge_base_id=kb_id,
            files=files,
            target_id=parent_id,
            settings=ctx.settings,
        )
        return import_jobs.job_out(job)
    finally:
        await form.close()


@router.get("/api/import-jobs/{job_id}", response_model=ImportJobOut, responses=errors_for(401, NotFound))
def get_import_job(job_id: uuid.UUID, session: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    """Status (pending, running, succeeded, failed), per-file results, warnings, document ids."""
    return import_jobs.job_out(import_jobs.get_import_job(session, principal, job_id))


class ImportJobList(BaseModel):
    items: list[ImportJobOut]
    total: int


@router.get("/api/import-jobs", response_model=ImportJobList, responses=errors_for(401, 422))
def list_import_jobs(
    session: SessionDep,
    principal: PrincipalDep,
    status_: Annotated[Literal["pending", "running", "succeeded", "failed"] | None, Query(alias="status")] = None,
    knowledge_base_id: Annotated[uuid.UUID | None, Query(description="only the jobs into this knowledge base")] = None,
    limit: Annotated[int, Query(ge=1, le=job_list.MAX_PAGE)] = 20,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """The caller's own import jobs, newest first (a job is its creator's only)."""
    rows, total = job_list.list_my_import_jobs(
        session, principal, status=status_, knowledge_base_id=knowledge_base_id, limit=limit, offset=offset
    )
    return {"items": [import_jobs.job_out(j) for j in rows], "total": total}
