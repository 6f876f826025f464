"""GET /api/knowledge-bases/{id}/export and GET /api/documents/{id}/export: a zip, streamed
(docs/export.md).

The export is decided, sized and audited in the request's unit of work (so a refusal is an
ordinary JSON error: 404 for what the caller cannot read, ``EXPORT_TOO_LARGE`` past the cap), and
the zip is then streamed from its own read-only session: the request's session commits when the
route returns, before the first byte is sent (server/deps.py). A document that is a folder
exports its subtree. ``X-Export-Bytes`` announces the pages' and assets' size before
compression, so a client can show progress while the zip (of unknown length) arrives.

``HEAD`` on the same routes answers those headers (or the refusal's status) without sending or
auditing anything: the web app asks it first to choose between collecting the zip in the tab and
handing it to the browser's own download, so one click is one audited ``GET`` (asking with a
``GET`` and cancelling it was a second, audited export).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Response
from fastapi.responses import StreamingResponse

from openkb.db import lift_request_bounds, session_scope
from openkb.errors import ExportTooLarge
from openkb.exporting import service as export_service
from openkb.exporting.service import ExportPlan, Target
from server.auth import UserDep
from server.deps import CtxDep, SessionDep
from server.errors import errors_for

router = APIRouter(tags=["export"])

_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
        "description": "the zip, streamed (Markdown files, assets/, openkb-export.json)",
        "headers": {
            "X-Export-Bytes": {"description": "pages and assets before compression", "schema": {"type": "integer"}}
        },
    },
    **errors_for(401, 403, 404, 422, ExportTooLarge),
}
IncludeDrafts = Annotated[
    bool, Query(description="also unpublished pages (drafts, archived); only editors can read them")
]


# a name a client that reads only ``filename=`` (curl -OJ, wget) can take as it is
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._()+-]*")


def _headers(plan: ExportPlan) -> dict[str, str]:
    plain = plan.filename if _PLAIN_NAME.fullmatch(plan.filename) else "export.zip"
    return {
        "Content-Disposition": f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(plan.filename)}",
        "X-Export-Bytes": str(plan.total_bytes),
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
    }


def _stream(ctx: Any, plan: ExportPlan) -> StreamingResponse:
    def body() -> Iterator[bytes]:
        with session_scope(ctx.engine) as s:
            lift_request_bounds(s)  # the client reads at its own pace: no statement/idle bound
            yield from export_service.iter_export(s, plan, ctx.blobs)

    return StreamingResponse(body(), media_type="application/zip", headers=_headers(plan))


def _preview(plan: ExportPlan) -> Response:
    return Response(status_code=200, media_type="application/zip", headers=_headers(plan))


@router.get("/api/knowledge-bases/{kb_id}/export", response_class=Response, responses=_RESPONSES)
def export_knowledge_base(
    kb_id: uuid.UUID, session: SessionDep, principal: UserDep, ctx: CtxDep, include_drafts: IncludeDrafts = False
) -> Response:
    """The knowledge base as a zip: what the caller can read; the rest is counted in the manifest."""
    plan = export_service.plan_export(
        session, principal, Target("knowledge_base", kb_id), include_drafts=include_drafts
    )
    return _stream(ctx, plan)


@router.get("/api/documents/{document_id}/export", response_class=Response, responses=_RESPONSES)
def export_document(
    document_id: uuid.UUID, session: SessionDep, principal: UserDep, ctx: CtxDep, include_drafts: IncludeDrafts = False
) -> Response:
    """A page (with the pages under it) or a folder's subtree as a zip."""
    plan = export_service.plan_export(
        session, principal, Target("document", document_id), include_drafts=include_drafts
    )
    return _stream(ctx, plan)


_HEAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "the headers GET would answer (X-Export-Bytes, the file name); nothing sent, not audited"},
    **errors_for(401, 403, 404, 422, ExportTooLarge),
}


@router.head("/api/knowledge-bases/{kb_id}/export", response_class=Response, responses=_HEAD_RESPONSES)
def preview_knowledge_base_export(
    kb_id: uuid.UUID, session: SessionDep, principal: UserDep, include_drafts: IncludeDrafts = False
) -> Response:
    """What GET would send (size and name) or why it would refuse; decided the same way."""
    plan = export_service.plan_export(
        session, principal, Target("knowledge_base", kb_id), include_drafts=include_drafts, audit=False
    )
    return _preview(plan)


@router.head("/api/documents/{document_id}/export", response_class=Response, responses=_HEAD_RESPONSES)
def preview_document_export(
    document_id: uuid.UUID, session: SessionDep, principal: UserDep, include_drafts: IncludeDrafts = False
) -> Response:
    """What GET would send (size and name) or why it would refuse; decided the same way."""
    plan = export_service.plan_export(
        session, principal, Target("document", document_id), include_drafts=include_drafts, audit=False
    )
    return _preview(plan)
