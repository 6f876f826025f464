"""/api/admin/*: user activation and suspension, registration settings, audit log.

tenant_admin (of the caller's tenant) or system_admin; a PAT also needs the ``admin`` scope.
Non-admins get 403 ``PERMISSION_DENIED`` (these routes are not secret); a user or tenant outside
the admin's reach is 404. Nothing here grants content access.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field

from openkb.accounts import admin as admin_svc
from openkb.accounts import auth_settings as settings_svc
from openkb.accounts import deletion as deletion_svc
from openkb.accounts import directory, tenant_settings
from openkb.importing import job_list
from openkb.indexing import verify_jobs
from openkb.models.enums import USER_STATUSES
from server.auth import AdminDep, AdminScopeDep, client_ip, user_agent
from server.deps import CtxDep, SessionDep
from server.errors import error_responses
from server.routers.auth import NO_NUL, Body, UserOut
from server.schemas import RequestModel

router = APIRouter(prefix="/api/admin", tags=["admin"])

UserStatus = Literal["pending_email_verification", "pending_activation", "active", "suspended", "deleted"]
assert set(UserStatus.__args__) == set(USER_STATUSES)  # type: ignore[attr-defined]

Limit = Annotated[int, Query(ge=1, le=admin_svc.MAX_PAGE)]
Offset = Annotated[int, Query(ge=0)]
_ERR_OBJ = error_responses(401, 403, 404, 409, 422)


class AdminUserOut(UserOut):
    tenant_id: uuid.UUID
    tenant_slug: str
    role: str


class AdminUserList(BaseModel):
    items: list[AdminUserOut]
    total: int
    limit: int
    offset: int


class UserResult(BaseModel):
    user: UserOut


class AuthSettingsOut(BaseModel):
    tenant_id: uuid.UUID | None = Field(description="null = the instance default")
    source: str = Field(description="where the values come from: tenant | instance")
    registration_enabled: bool
    email_verification_required: bool
    default_signup_status: str
    invited_user_auto_active: bool
    allowed_email_domains: list[str] | None
    invite_required: bool
    first_user_becomes_admin: bool


Domain = Annotated[str, Field(min_length=1, max_length=253)]


class AuthSettingsIn(Body):
    """Partial update: only the fields sent change."""

    model_config = ConfigDict(extra="forbid")

    registration_enabled: bool | None = None
    email_verification_required: bool | None = None
    default_signup_status: Literal["active", "pending_activation"] | None = None
    invited_user_auto_active: bool | None = None
    allowed_email_domains: list[Domain] | None = Field(None, max_length=1000)
    invite_required: bool | None = None
    first_user_becomes_admin: bool | None = None


class AuditLogOut(BaseModel):
    id: uuid.UUID
    tenant_id: uuid.UUID | None
    actor_user_id: uuid.UUID | None
    actor_email: str | None = Field(None, description="the actor's current email (null for the system)")
    actor_type: str
    action: str
    object_type: str | None
    object_id: uuid.UUID | None
    metadata: dict[str, Any]
    ip: str | None
    user_agent: str | None
    created_at: datetime


class AuditLogList(BaseModel):
    items: list[AuditLogOut]
    total: int
    next_offset: int | None


def _req(request: Request, principal: Any) -> admin_svc.Request:
    return admin_svc.Request(principal=principal, ip=client_ip(request), user_agent=user_agent(request))


# --- users ---------------------------------------------------------------------------------------


@router.get("/users", response_model=AdminUserList, responses=_ERR_OBJ)
def list_users(
    session: SessionDep,
    scope: AdminScopeDep,
    status_: Annotated[UserStatus | None, Query(alias="status")] = None,
    tenant_id: uuid.UUID | None = None,
    q: Annotated[str | None, Query(max_length=320, pattern=NO_NUL, description="email or name contains")] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> AdminUserList:
    rows, total = admin_svc.list_users(
        session, scope, status=status_, tenant_id=tenant_id, q=q, limit=limit, offset=offset
    )
    items = [
        AdminUserOut(**UserOut.of(r.user).model_dump(), tenant_id=r.tenant_id, tenant_slug=r.tenant_slug, role=r.role)
        for r in rows
    ]
    return AdminUserList(items=items, total=total, limit=limit, offset=offset)


@router.post("/users/{user_id}/activate", response_model=UserResult, responses=_ERR_OBJ)
def activate_user(user_id: uuid.UUID, session: SessionDep, principal: AdminDep) -> UserResult:
    return UserResult(user=UserOut.of(admin_svc.activate(session, principal, user_id)))


@router.post("/users/{user_id}/suspend", response_model=UserResult, responses=_ERR_OBJ)
def suspend_user(user_id: uuid.UUID, session: SessionDep, principal: AdminDep) -> UserResult:
    """Suspension takes effect on the user's next request (sessions revoked, tokens refused)."""
    return UserResult(user=UserOut.of(admin_svc.suspend(session, principal, user_id)))


@router.post("/users/{user_id}/reject", response_model=UserResult, responses=_ERR_OBJ)
def reject_user(user_id: uuid.UUID, session: SessionDep, principal: AdminDep) -> UserResult:
    """Refuse a pending sign-up (status ``deleted``)."""
    return UserResult(user=UserOut.of(admin_svc.reject(session, principal, user_id)))


class DeleteUserIn(RequestModel):
    successor_id: uuid.UUID | None = Field(
        None, description="an active user of the same tenant who takes over what the deleted user owned"
    )


class DeletedUserOut(BaseModel):
    user: UserOut
    counts: dict[str, int] = Field(description="what was handed over, revoked and removed")


@router.post("/users/{user_id}/delete", response_model=DeletedUserOut, responses=_ERR_OBJ)
def delete_user(
    user_id: uuid.UUID, session: SessionDep, principal: AdminDep, body: DeleteUserIn | None = None
) -> DeletedUserOut:
    """Soft delete and anonymize (docs/accounts.md#deleting-a-user): sessions, tokens, OAuth grants
    and memberships go, content stays. 409 ``CONFLICT`` with ``reason: owns_content`` (and counts)
    when the user owns workspaces or knowledge bases and no ``successor_id`` is given, or
    ``reason: last_system_admin``; 403 for oneself, for a system_admin (unless one), and for a user
    who also belongs to another tenant (tenant_admin)."""
    done = deletion_svc.delete_user(session, principal, user_id, successor_id=body.successor_id if body else None)
    return DeletedUserOut(user=UserOut.of(done.user), counts=done.counts)


@router.post(
    "/users/{user_id}/resend-verification",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=UserResult,
    responses=_ERR_OBJ,
)
def resend_verification(user_id: uuid.UUID, session: SessionDep, ctx: CtxDep, principal: AdminDep) -> UserResult:
    user = admin_svc.resend_verification(session, ctx, principal, user_id)
    return UserResult(user=UserOut.of(user))


# --- auth settings -------------------------------------------------------------------------------


def _settings_out(tenant_id: uuid.UUID | None, eff: settings_svc.Effective) -> AuthSettingsOut:
    return AuthSettingsOut(tenant_id=tenant_id, source=eff.source, **settings_svc.as_dict(eff.row))


@router.get("/auth-settings", response_model=AuthSettingsOut, responses=error_responses(401, 403, 404, 422))
def get_auth_settings(session: SessionDep, scope: AdminScopeDep, tenant_id: uuid.UUID | None = None) -> AuthSettingsOut:
    """Effective settings: a system_admin without ``tenant_id`` reads the instance default; a
    tenant_admin reads their tenant (its override, else the instance default)."""
    target, eff = settings_svc.read_for_admin(session, scope, tenant_id)
    return _settings_out(target, eff)


@router.put("/auth-settings", response_model=AuthSettingsOut, responses=error_responses(401, 403, 404, 422))
def put_auth_settings(
    body: AuthSettingsIn,
    request: Request,
    session: SessionDep,
    principal: AdminDep,
    scope: AdminScopeDep,
    tenant_id: uuid.UUID | None = None,
) -> AuthSettingsOut:
    """Change the instance default (system_admin) or a tenant override (created on first write)."""
    target, eff = settings_svc.update(
        session, scope, _req(request, principal), tenant_id, body.model_dump(exclude_unset=True)
    )
    return _settings_out(target, eff)


@router.delete(
    "/auth-settings",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=error_responses(401, 403, 404, 422),
)
def delete_auth_settings_override(
    request: Request,
    session: SessionDep,
    principal: AdminDep,
    scope: AdminScopeDep,
    tenant_id: Annotated[uuid.UUID, Query()],
) -> Response:
    """Remove a tenant's override so the instance default applies again."""
    settings_svc.delete_override(session, scope, _req(request, principal), tenant_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# --- tenant settings (docs/accounts.md#tenant-settings) -------------------------------------------


class TenantSettingsOut(BaseModel):
    tenant_id: uuid.UUID
    tenant_slug: str
    time_zone: str | None = Field(
        description="IANA name: the apps' quota day of members who set no zone of their own; null: UTC"
    )


class TenantSettingsIn(Body):
    time_zone: str | None = Field(max_length=64, description="IANA name (Asia/Shanghai); null or empty: UTC")


@router.get("/tenant-settings", response_model=TenantSettingsOut, responses=error_responses(401, 403, 404, 422))
def get_tenant_settings(session: SessionDep, principal: AdminDep, tenant_id: uuid.UUID | None = None) -> dict[str, Any]:
    """The tenant's settings (default: the administrator's own tenant)."""
    return tenant_settings.read_settings(session, principal, tenant_id)


@router.put("/tenant-settings", response_model=TenantSettingsOut, responses=error_responses(401, 403, 404, 422))
def put_tenant_settings(
    body: TenantSettingsIn,
    request: Request,
    session: SessionDep,
    principal: AdminDep,
    tenant_id: uuid.UUID | None = None,
) -> dict[str, Any]:
    """Set or clear the tenant's default time zone (an unknown zone is 422 ``VALIDATION_ERROR``,
    as on the profile)."""
    return tenant_settings.set_time_zone(
        session, principal, tenant_id, body.time_zone, ip=client_ip(request), user_agent=user_agent(request)
    )


# --- index verify / repair -----------------------------------------------------------------------


class IndexVerifyIn(RequestModel):
    repair: bool = Field(False, description="fix what differs (as `openkb index verify --repair`)")


class VerifyProgress(BaseModel):
    phase: str = Field(description="compare (pages checked) | repair (documents to re-sync)")
    done: int
    total: int


class VerifyJobOut(BaseModel):
    id: uuid.UUID
    repair: bool
    status: str = Field(description="pending | running | succeeded | failed")
    phase: str | None = Field(description="what a running job is doing: compare | repair")
    progress: VerifyProgress | None = Field(None, description="while pending or running")
    collection: str | None
    report: dict[str, Any] | None = Field(description="verify's report: missing, extra, stale, ok, repaired, ...")
    error: str | None
    started_by: uuid.UUID | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class VerifyJobList(BaseModel):
    items: list[VerifyJobOut]


@router.post(
    "/milvus/verify-jobs",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=VerifyJobOut,
    responses={**error_responses(401, 403, 422), 200: {"model": VerifyJobOut, "description": "one is already live"}},
)
def start_verify(body: IndexVerifyIn, response: Response, session: SessionDep, principal: AdminDep) -> VerifyJobOut:
    """Verify (and with ``repair`` fix) the active collection against PostgreSQL in the worker;
    poll ``GET .../verify-jobs/{id}``. 202 with a new job, 200 with the live one if any."""
    job, created = verify_jobs.start_verify(session, principal, repair=body.repair)
    if not created:
        response.status_code = status.HTTP_200_OK
    return VerifyJobOut(**verify_jobs.job_out(job))


@router.get("/milvus/verify-jobs", response_model=VerifyJobList, responses=error_responses(401, 403, 422))
def list_verify_jobs(
    session: SessionDep, principal: AdminDep, limit: Annotated[int, Query(ge=1, le=50)] = 10
) -> VerifyJobList:
    """Newest first: the console finds a running job again after a reload."""
    rows = verify_jobs.list_verify_jobs(session, principal, limit=limit)
    return VerifyJobList(items=[VerifyJobOut(**verify_jobs.job_out(j)) for j in rows])


@router.get("/milvus/verify-jobs/{job_id}", response_model=VerifyJobOut, responses=error_responses(401, 403, 404))
def get_verify_job(job_id: uuid.UUID, session: SessionDep, principal: AdminDep) -> VerifyJobOut:
    return VerifyJobOut(**verify_jobs.job_out(verify_jobs.get_verify_job(session, principal, job_id)))


# --- import jobs ---------------------------------------------------------------------------------


class AdminImportProgress(BaseModel):
    phase: str | None
    done: int | None
    total: int | None


class AdminImportJobOut(BaseModel):
    """No file names, per-file results or error text: those can name private documents."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    knowledge_base_id: uuid.UUID
    status: str = Field(description="pending | running | succeeded | failed")
    progress: AdminImportProgress | None = Field(description="while running")
    counts: dict[str, int]
    created_by: uuid.UUID
    created_by_email: str | None
    created_at: datetime
    updated_at: datetime


class AdminImportJobList(BaseModel):
    items: list[AdminImportJobOut]
    total: int
    limit: int
    offset: int


@router.get("/import-jobs", response_model=AdminImportJobList, responses=error_responses(401, 403, 404, 422))
def admin_import_jobs(
    session: SessionDep,
    principal: AdminDep,
    status_: Annotated[Literal["pending", "running", "succeeded", "failed"] | None, Query(alias="status")] = None,
    tenant_id: uuid.UUID | None = None,
    limit: Annotated[int, Query(ge=1, le=job_list.MAX_PAGE)] = 20,
    offset: Offset = 0,
) -> AdminImportJobList:
    """The tenant's import jobs, newest first, for the console's live view (poll while some run)."""
    rows, total = job_list.list_tenant_import_jobs(
        session, principal, status=status_, tenant_id=tenant_id, limit=limit, offset=offset
    )
    return AdminImportJobList(items=[AdminImportJobOut(**r) for r in rows], total=total, limit=limit, offset=offset)


# --- audit log -----------------------------------------------------------------------------------


@router.get("/audit-logs", response_model=AuditLogList, responses=error_responses(401, 403, 404, 422))
def audit_logs(
    session: SessionDep,
    scope: AdminScopeDep,
    action: Annotated[
        str | None, Query(max_length=200, pattern=NO_NUL, description="exact action, or a prefix ending in '.'")
    ] = None,
    object_type: Annotated[str | None, Query(max_length=100, pattern=NO_NUL)] = None,
    object_id: uuid.UUID | None = None,
    actor_user_id: uuid.UUID | None = None,
    actor: Annotated[
        str | None,
        Query(
            max_length=320,
            pattern=NO_NUL,
            description="the actor's email or user id (an unknown email matches nothing)",
        ),
    ] = None,
    tenant_id: uuid.UUID | None = None,
    since: datetime | None = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> AuditLogList:
    if actor and actor.strip():
        try:
            actor_user_id = uuid.UUID(actor.strip())
        except ValueError:
            actor_user_id = directory.user_id_by_email(session, actor)
            if actor_user_id is None:
                return AuditLogList(items=[], total=0, next_offset=None)
    rows, total = admin_svc.list_audit_logs(
        session,
        scope,
        action=action,
        object_type=object_type,
        object_id=object_id,
        actor_user_id=actor_user_id,
        tenant_id=tenant_id,
        since=since,
        limit=limit,
        offset=offset,
    )
    labels = directory.subject_labels(session, (("user", r.actor_user_id) for r in rows if r.actor_user_id))
    items = [
        AuditLogOut(
            **admin_svc.audit_row(r),
            actor_email=(labels.get(("user", r.actor_user_id)) or directory.NO_LABEL).email,
        )
        for r in rows
    ]
    nxt = offset + len(items) if offset + len(items) < total else None
    return AuditLogList(items=items, total=total, next_offset=nxt)
