"""/api/uploads and /api/assets: uploads into the blob store, reads only after the document check.

The upload body is parsed here, not by FastAPI's form machinery, so that the size limit holds
while the bytes arrive: a declared ``Content-Length`` over the limit is refused before reading,
and a chunked body is cut off as soon as it passes the limit (``UPLOAD_TOO_LARGE``, 413).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Cookie, Header, Path, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, StreamingResponse
from pydantic import BaseModel
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from openkb import assets as asset_service
from openkb.content import limits
from openkb.errors import (
    RangeNotSatisfiable,
    SharePasswordIncorrect,
    SharePasswordRequired,
    UnsupportedMedia,
    UploadTooLarge,
    ValidationError,
)
from server import ranges
from server.auth import PrincipalDep
from server.deps import CtxDep, SessionDep
from server.errors import error_responses, errors_for
from server.routers.content import DocWriterDep
from server.routers.sharing import SHARE_COOKIE, visitor_for

router = APIRouter(tags=["assets"])

MULTIPART_OVERHEAD = 64 * 1024  # boundaries and the small form fields around the file


class AssetOut(BaseModel):
    id: uuid.UUID
    document_id: uuid.UUID | None
    filename: str | None
    mime_type: str
    size_bytes: int
    sha256: str | None
    ref: str
    url: str
    created_at: datetime


_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "document_id": {
                            "type": "string",
                            "format": "uuid",
                            "description": "attach to this document (needs edit rights)",
                        },
                    },
                }
            }
        },
    }
}


async def _limited(request: Request, limit: int) -> AsyncGenerator[bytes, None]:
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit + MULTIPART_OVERHEAD:
            raise limits.UploadTooLarge(f"the upload is larger than {limit} bytes", limit="max_upload_bytes", max=limit)
        yield chunk


_UPLOAD_FIELDS = ("file", "document_id")


@router.post(
    "/api/uploads",
    status_code=status.HTTP_201_CREATED,
    response_model=AssetOut,
    openapi_extra=_UPLOAD_BODY,
    responses=errors_for(401, 403, 404, 413, 415, 422, UploadTooLarge, UnsupportedMedia),
)
async def upload(
    request: Request,
    session: SessionDep,
    actor: DocWriterDep,
    ctx: CtxDep,
    document_id: Annotated[uuid.UUID | None, Query(description="same as the form field")] = None,
) -> dict[str, Any]:
    """Multipart upload (field ``file``). Reference it in Markdown as ``asset://<id>``."""
    limit = ctx.settings.max_upload_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit + MULTIPART_OVERHEAD:
        raise limits.UploadTooLarge(f"the upload is larger than {limit} bytes", limit="max_upload_bytes", max=limit)
    ctype = request.headers.get("content-type", "")
    if not ctype.lower().startswith("multipart/form-data"):
        raise UnsupportedMedia("send the file as multipart/form-data (field 'file')")
    try:
        form = await MultiPartParser(request.headers, _limited(request, limit), max_files=1, max_fields=5).parse()
    except MultiPartException as exc:
        raise ValidationError(f"malformed multipart body: {exc.message}", field="file") from None
    try:
        unknown = sorted(k for k in form.keys() if k not in _UPLOAD_FIELDS)
        if unknown:  # the same rule as JSON bodies (server/schemas.py): never drop a field in silence
            raise ValidationError(
                f"{unknown[0]}: unknown field, not accepted here; accepted fields: {', '.join(_UPLOAD_FIELDS)}",
                field=unknown[0],
            )
        file = form.get("file")
        if not isinstance(file, UploadFile):
            raise ValidationError("the form needs a 'file' part", field="file")
        raw_doc = form.get("document_id")
        doc_id = document_id
        if isinstance(raw_doc, str) and raw_doc.strip():
            try:
                doc_id = uuid.UUID(raw_doc.strip())
            except ValueError:
                raise ValidationError("document_id must be a UUID", field="document_id") from None
        a = await run_in_threadpool(
            asset_service.upload_asset,
            session,
            actor,
            ctx.blobs,
            file.file,
            size=file.size,
            filename=file.filename,
            content_type=file.content_type,
            document_id=doc_id,
            settings=ctx.settings,
        )
        return asset_service.asset_out(a)
    finally:
        await form.close()


def _serve(ctx: Any, a: Any, download: bool, request: Request) -> Response:
    """The asset's bytes, after the caller's read check: all of them, one range (``206``) or
    none (``304``, the client's copy is current), see ``server/ranges.py``. With S3, a redirect
    to a signed URL, where the object store serves ranges itself."""
    ctype, disp = asset_service.disposition(a, download)
    etag = ranges.etag_of(a.sha256)
    headers = {
        "Content-Disposition": disp,
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox; default-src 'none'",
        "Cache-Control": "private, max-age=300",
        "ETag": etag,
        "Accept-Ranges": "bytes",
    }
    if ranges.not_modified(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers={k: headers[k] for k in ("ETag", "Cache-Control")})
    url = ctx.blobs.signed_url(a.object_key, 300, content_type=ctype, disposition=disp)
    if url:
        return RedirectResponse(url, status_code=307, headers={"Cache-Control": "private, no-store"})
    part = ranges.byte_range(
        request.headers.get("range"), a.size_bytes, if_range=request.headers.get("if-range"), etag=etag
    )
    if part is None:
        return StreamingResponse(
            ctx.blobs.open(a.object_key), media_type=ctype, headers={**headers, "Content-Length": str(a.size_bytes)}
        )
    first, last = part
    return StreamingResponse(
        ctx.blobs.open(a.object_key, first, last - first + 1),
        status_code=206,
        media_type=ctype,
        headers={
            **headers,
            "Content-Length": str(last - first + 1),
            "Content-Range": f"bytes {first}-{last}/{a.size_bytes}",
        },
    )


_ASSET_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        "description": "the bytes (local blob store)",
    },
    206: {"description": "the one byte range the Range header asked for (Content-Range says which)"},
    304: {"description": "If-None-Match names the asset's ETag (its SHA-256): the cached copy is current"},
    307: {"description": "S3: redirect to a short-lived signed URL"},
    **error_responses(401, 403, 404, 422),
    **errors_for(RangeNotSatisfiable),
}
_SHARED_ASSET_RESPONSES = {**_ASSET_RESPONSES, **errors_for(401, 403, SharePasswordRequired, SharePasswordIncorrect)}


@router.get("/api/assets/{asset_id}", response_class=Response, responses=_ASSET_RESPONSES)
def get_asset(
    asset_id: uuid.UUID,
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
    ctx: CtxDep,
    download: bool = False,
) -> Response:
    """Streamed after the read check on its document (404 when the caller cannot read it);
    ``Range`` and ``If-None-Match`` are honoured (docs/api.md#assets)."""
    return _serve(ctx, asset_service.access_asset(session, principal, asset_id), download, request)


@router.get("/api/assets/{asset_id}/info", response_model=AssetOut, responses=error_responses(401, 403, 404, 422))
def asset_info(asset_id: uuid.UUID, session: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    return asset_service.asset_out(asset_service.access_asset(session, principal, asset_id))


@router.delete(
    "/api/assets/{asset_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=error_responses(401, 403, 404, 422),
)
def delete_asset(asset_id: uuid.UUID, session: SessionDep, actor: DocWriterDep, ctx: CtxDep) -> Response:
    asset_service.delete_asset(session, actor, ctx.blobs, asset_id)
    return Response(status_code=204)


@router.get("/api/share/{token}/assets/{asset_id}", response_class=Response, responses=_SHARED_ASSET_RESPONSES)
def get_shared_asset(
    token: Annotated[str, Path(min_length=1, max_length=200)],
    asset_id: uuid.UUID,
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
    ctx: CtxDep,
    download: bool = False,
    x_share_access: Annotated[str | None, Header(alias="X-Share-Access", max_length=200)] = None,
    share_cookie: Annotated[str | None, Cookie(alias=SHARE_COOKIE, max_length=200)] = None,
) -> Response:
    """An asset of a document the share link opens."""
    visitor, _link = visitor_for(request, session, token, principal, ctx, x_share_access, share_cookie)
    return _serve(ctx, asset_service.access_asset(session, visitor, asset_id), download, request)
