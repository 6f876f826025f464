"""Lists of import jobs: the caller's own (``GET /api/import-jobs``) and the tenant's for the
admin console (``GET /api/admin/import-jobs``), newest first, paginated by the server.

Trap: the console's list is for operators, who see configuration and never private content
(docs/permissions.md#administrators). A job's file names, per-file results, error text and the
file being converted can all name private documents, so the admin rows carry status, counts,
the progress numbers, who started it and when, and nothing else. The creator's own list uses the
full ``job_out`` like ``GET /api/import-jobs/{id}``.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from openkb.accounts.users import access_admin
from openkb.errors import NotFound, Unauthenticated, ValidationError
from openkb.models import ImportJob, User
from openkb.models.enums import IMPORT_STATUSES
from openkb.permissions.principal import Principal

MAX_PAGE = 100


def _check(status: str | None, limit: int, offset: int) -> None:
    if status is not None and status not in IMPORT_STATUSES:
        raise ValidationError(f"status must be one of {', '.join(IMPORT_STATUSES)}", field="status")
    if not 1 <= limit <= MAX_PAGE:
        raise ValidationError(f"limit must be 1-{MAX_PAGE}", field="limit")
    if offset < 0:
        raise ValidationError("offset must be >= 0", field="offset")


def list_my_import_jobs(
    session: Session,
    principal: Principal,
    *,
    status: str | None = None,
    knowledge_base_id: uuid.UUID | None = None,
    limit: int = 20,
    offset: int = 0,
) -> tuple[list[ImportJob], int]:
    """The caller's jobs in their tenant (a job is visible to its creator only), optionally those
    into one knowledge base: the creator's own records, so no other permission is asked."""
    _check(status, limit, offset)
    if principal.kind != "user" or principal.user_id is None:
        raise Unauthenticated("sign in to list your imports")
    q = select(ImportJob).where(ImportJob.created_by == principal.user_id, ImportJob.tenant_id == principal.tenant_id)
    if status:
        q = q.where(ImportJob.status == status)
    if knowledge_base_id is not None:
        q = q.where(ImportJob.knowledge_base_id == knowledge_base_id)
    total = session.exec(select(func.count()).select_from(q.subquery())).one()
    rows = session.exec(
        q.order_by(col(ImportJob.created_at).desc(), col(ImportJob.id).desc()).limit(limit).offset(offset)
    ).all()
    return list(rows), int(total)


def admin_job_out(job: ImportJob, creator_email: str | None) -> dict[str, Any]:
    r = job.results or {}
    p = r.get("progress") or None
    return {
        "id": job.id,
        "tenant_id": job.tenant_id,
        "knowledge_base_id": job.knowledge_base_id,
        "status": job.status,
        "progress": {"phase": p.get("phase"), "done": p.get("done"), "total": p.get("total")} if p else None,
        "counts": r.get("counts", {}),
        "created_by": job.created_by,
        "created_by_email": creator_email,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
    }


def list_tenant_import_jobs(
    session: Session,
    principal: Principal,
    *,
    status: str | None = None,
    tenant_id: uuid.UUID | None = None,
    limit: int = 20,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """The admin's tenant's jobs (a system_admin: every tenant, or the named one)."""
    _check(status, limit, offset)
    scope = access_admin(session, principal)
    if tenant_id is not None and not scope.can_manage_tenant(tenant_id):
        raise NotFound("no such tenant")
    if not scope.is_system_admin:
        tenant_id = scope.tenant_id
    q = select(ImportJob, User.email).join(User, col(User.id) == ImportJob.created_by, isouter=True)
    if tenant_id is not None:
        q = q.where(ImportJob.tenant_id == tenant_id)
    if status:
        q = q.where(ImportJob.status == status)
    total = session.exec(select(func.count()).select_from(q.subquery())).one()
    rows = session.exec(
        q.order_by(col(ImportJob.created_at).desc(), col(ImportJob.id).desc()).limit(limit).offset(offset)
    ).all()
    return [admin_job_out(j, email) for j, email in rows], int(total)


__all__ = ["admin_job_out", "list_my_import_jobs", "list_tenant_import_jobs"]
