"""/api/auth/* and /api/me/tokens: registration, verification, login sessions, password reset, PATs.

Routes only parse, call one service and shape the response; the unit of work (``SessionDep``)
commits before the response is sent, and mails go out after that commit.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter, Request, Response, status
from pydantic import BaseModel, Field, field_validator

from openkb.accounts import passwords, registration, sessions, tokens
from openkb.accounts.users import tenant_roles
from openkb.content.workspaces import list_workspaces
from openkb.errors import (
    AccountPendingActivation,
    AccountSuspended,
    EmailDomainNotAllowed,
    EmailNotVerified,
    InsufficientScope,
    InvalidCredentials,
    InvalidToken,
    RegistrationDisabled,
    RegistrationInviteRequired,
)
from openkb.models import McpPersonalAccessToken, User
from server.auth import SESSION_COOKIE, AuthDep, UserDep, client_ip, require_user, user_agent
from server.deps import CtxDep, SessionDep
from server.errors import error_responses, errors_for
from server.schemas import RequestModel

router = APIRouter(tags=["auth"])


# --- shapes ------------------------------------------------------------------------------------

NO_NUL = r"^[^\x00]*$"  # for Query(pattern=...): PostgreSQL text cannot hold NUL


class Body(RequestModel):
    """Request bodies: refuse NUL characters up front (PostgreSQL text can't store them, and a
    driver error would otherwise surface as a 500), and unknown fields (``RequestModel``)."""

    @field_validator("*", mode="after")
    @classmethod
    def _no_nul(cls, v: object) -> object:
        items = v if isinstance(v, list) else [v]
        if any(isinstance(i, str) and "\x00" in i for i in items):
            raise ValueError("must not contain NUL characters")
        return v


class UserOut(BaseModel):
    id: uuid.UUID
    email: str
    display_name: str
    status: str
    email_verified_at: datetime | None = None
    created_at: datetime
    time_zone: str | None = Field(None, description="IANA name; null: UTC")

    @classmethod
    def of(cls, u: User) -> UserOut:
        return cls(
            id=u.id,
            email=u.email,
            display_name=u.display_name,
            status=u.status,
            email_verified_at=u.email_verified_at,
            created_at=u.created_at,
            time_zone=u.time_zone,
        )


class RegisterIn(Body):
    email: str = Field(min_length=3, max_length=320)
    password: str = Field(min_length=8, max_length=1024)
    display_name: str | None = Field(None, min_length=1, max_length=1000)
    invitation_token: str | None = Field(None, min_length=1, max_length=200)


class RegisterOut(BaseModel):
    user: UserOut
    verification_required: bool
    invitation: dict | None = None
    mail_to_outbox: bool = Field(
        False,
        description="the verification link was written to the server's outbox folder, not mailed "
        "(no SMTP server is configured): the operator reads it there or runs `openkb user activate`",
    )


class ResetRequestOut(BaseModel):
    status: str = "accepted"
    detail: str
    mail_to_outbox: bool = Field(
        description="a link goes to the server's outbox folder, not to the address (no SMTP server "
        "is configured); the same answer for every address"
    )


class LoginIn(Body):
    email: str = Field(min_length=1, max_length=320)
    password: str = Field(min_length=1, max_length=1024)
    tenant: str | None = Field(None, max_length=100, description="tenant slug or id (default: the default tenant)")


class LoginOut(BaseModel):
    user: UserOut
    csrf_token: str
    tenant_id: uuid.UUID
    expires_at: datetime


class TenantRoleOut(BaseModel):
    tenant_id: uuid.UUID
    tenant_slug: str
    role: str


class MeWorkspaceOut(BaseModel):
    id: uuid.UUID
    name: str
    slug: str
    role: str = Field(description="owner | admin | member | guest")


class MeOut(BaseModel):
    user: UserOut
    tenant_id: uuid.UUID
    tenant_roles: list[TenantRoleOut]
    workspaces: list[MeWorkspaceOut] = Field(description="the caller's workspaces in this tenant, with its role")
    auth_method: str = Field(description="session | token")
    scopes: list[str] | None = Field(None, description="token scopes; null = a session with every scope")
    csrf_token: str | None = Field(None, description="for cookie sessions: send it as X-CSRF-Token on writes")


class VerifyIn(Body):
    token: str = Field(min_length=1, max_length=200)
    invitation_token: str | None = Field(
        None, min_length=1, max_length=200, description="the link's `invitation` parameter, if present"
    )


class VerifyOut(BaseModel):
    user: UserOut
    invitation: dict | None = None


class ResetRequestIn(Body):
    email: str = Field(min_length=1, max_length=320)


class ResetConfirmIn(Body):
    token: str = Field(min_length=1, max_length=200)
    password: str = Field(min_length=8, max_length=1024)


class PatIn(Body):
    name: str = Field(min_length=1, max_length=1000)
    scopes: list[tokens.PatScope] = Field(min_length=1, max_length=len(tokens.PAT_SCOPES))  # type: ignore[valid-type]
    expires_at: datetime | None = None


class PatCreated(BaseModel):
    id: uuid.UUID
    token: str = Field(description="shown once; store it now")
    name: str
    scopes: list[str]
    expires_at: datetime | None


class PatOut(BaseModel):
    id: uuid.UUID
    name: str
    scopes: list[str]
    status: str
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None
    created_at: datetime

    @classmethod
    def of(cls, t: McpPersonalAccessToken) -> PatOut:
        return cls(
            id=t.id,
            name=t.name,
            scopes=list(t.scopes),
            status=tokens.effective_status(t),
            expires_at=t.expires_at,
            last_used_at=t.last_used_at,
            revoked_at=t.revoked_at,
            created_at=t.created_at,
        )


class PatList(BaseModel):
    items: list[PatOut]


# --- registration and verification --------------------------------------------------------------


@router.post(
    "/api/auth/register",
    status_code=status.HTTP_201_CREATED,
    response_model=RegisterOut,
    responses=errors_for(
        400, 403, 422, InvalidToken, RegistrationDisabled, RegistrationInviteRequired, EmailDomainNotAllowed
    ),
)
def register(body: RegisterIn, request: Request, session: SessionDep, ctx: CtxDep) -> RegisterOut:
    """Create an account. 403 ``REGISTRATION_DISABLED`` / ``REGISTRATION_INVITE_REQUIRED``, 422
    ``EMAIL_DOMAIN_NOT_ALLOWED``, 400 ``INVALID_TOKEN`` (bad invitation).

    An address that already has an account gets the same 201 and the same body shape as a new
    one (the contract's ``{user: {id, email, display_name, status}}``, kept so clients need no
    second shape), with a stand-in user whose ``id`` is random and stored nowhere; the owner of
    the address is mailed instead. So the answer never tells whether an address is registered
    (login and password reset don't either). Clients should show "check your mailbox" when
    ``verification_required`` is true, and must not rely on ``user.id`` before signing in."""
    r = registration.register(
        session,
        ctx,
        email=body.email,
        password=body.password,
        display_name=body.display_name,
        invitation_token=body.invitation_token,
        ip=client_ip(request),
        user_agent=user_agent(request),
    )
    return RegisterOut(
        user=UserOut.of(r.user),
        verification_required=r.verification_sent,
        invitation=r.invitation,
        mail_to_outbox=r.mail_to_outbox,
    )


@router.post("/api/auth/verify-email", response_model=VerifyOut, responses=errors_for(400, 422, InvalidToken))
def verify_email(body: VerifyIn, request: Request, session: SessionDep, ctx: CtxDep) -> VerifyOut:
    """Consume the mailed link's token (and accept the invitation it carries). 400
    ``INVALID_TOKEN`` when unknown, used or expired."""
    v = registration.verify_email(
        session,
        ctx,
        body.token,
        invitation_token=body.invitation_token,
        ip=client_ip(request),
        user_agent=user_agent(request),
    )
    return VerifyOut(user=UserOut.of(v.user), invitation=v.invitation)


@router.post(
    "/api/auth/password-reset/request",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=ResetRequestOut,
    responses=error_responses(422),
)
def password_reset_request(body: ResetRequestIn, request: Request, session: SessionDep, ctx: CtxDep) -> ResetRequestOut:
    """Always 202, whether or not the address has an account (no account enumeration).
    ``mail_to_outbox`` (the same for every address) says a link would go to the server's outbox
    folder, not to the address."""
    passwords.request_reset(session, ctx, body.email, ip=client_ip(request), user_agent=user_agent(request))
    return ResetRequestOut(
        detail="if the address has an account, a reset link is on its way", mail_to_outbox=ctx.mailer.to_outbox
    )


@router.post("/api/auth/password-reset/confirm", response_model=VerifyOut, responses=errors_for(400, 422, InvalidToken))
def password_reset_confirm(body: ResetConfirmIn, request: Request, session: SessionDep) -> VerifyOut:
    """Set the new password and sign out every session of the account."""
    user = passwords.confirm_reset(
        session, body.token, body.password, ip=client_ip(request), user_agent=user_agent(request)
    )
    return VerifyOut(user=UserOut.of(user))


# --- sessions ----------------------------------------------------------------------------------


def _cookie_secure(ctx: CtxDep) -> bool:
    return ctx.settings.app_base_url.lower().startswith("https://")


@router.post(
    "/api/auth/login",
    response_model=LoginOut,
    responses=errors_for(
        401, 403, 422, 429, InvalidCredentials, EmailNotVerified, AccountPendingActivation, AccountSuspended
    ),
)
def login(body: LoginIn, request: Request, response: Response, session: SessionDep, ctx: CtxDep) -> LoginOut:
    """401 ``INVALID_CREDENTIALS`` (unknown email and wrong password alike); 403
    ``EMAIL_NOT_VERIFIED`` / ``ACCOUNT_PENDING_ACTIVATION`` / ``ACCOUNT_SUSPENDED``; 429
    ``RATE_LIMITED`` after too many failures per account or per IP."""
    r = sessions.login(
        session,
        ctx,
        email=body.email,
        password=body.password,
        ip=client_ip(request),
        user_agent=user_agent(request),
        tenant=body.tenant,
    )
    response.set_cookie(
        SESSION_COOKIE,
        r.token,
        max_age=sessions.expires_in_seconds(r.session),
        path="/",
        httponly=True,
        samesite="lax",
        secure=_cookie_secure(ctx),
    )
    return LoginOut(
        user=UserOut.of(r.user),
        csrf_token=r.session.csrf_token,
        tenant_id=r.session.tenant_id,
        expires_at=r.session.expires_at,
    )


@router.post(
    "/api/auth/logout",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=error_responses(401, 403),
)
def logout(request: Request, auth: AuthDep, session: SessionDep, ctx: CtxDep) -> Response:
    """Revoke the cookie's session (the next request with it is anonymous). Idempotent; a
    cookie-authenticated call needs ``X-CSRF-Token`` (403 ``CSRF_FAILED``)."""
    if auth.session_id is not None:
        sessions.logout(session, auth.principal, auth.session_id, ip=client_ip(request), user_agent=user_agent(request))
    resp = Response(status_code=status.HTTP_204_NO_CONTENT)
    resp.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=_cookie_secure(ctx))
    return resp


@router.get("/api/auth/me", response_model=MeOut, responses=error_responses(401))
@router.get("/api/me", response_model=MeOut, responses=error_responses(401))
def me(auth: AuthDep, session: SessionDep) -> MeOut:
    """Who is calling (``/api/me`` is the same answer)."""
    principal = require_user(auth)
    assert principal.user_id is not None and principal.tenant_id is not None
    user = session.get(User, principal.user_id)
    assert user is not None
    roles = [
        TenantRoleOut(tenant_id=r.tenant_id, tenant_slug=r.tenant_slug, role=r.role)
        for r in tenant_roles(session, user.id)
    ]
    workspaces = [
        MeWorkspaceOut(id=w["id"], name=w["name"], slug=w["slug"], role=w["role"])
        for w in list_workspaces(session, principal)
    ]
    return MeOut(
        user=UserOut.of(user),
        tenant_id=principal.tenant_id,
        tenant_roles=roles,
        workspaces=workspaces,
        auth_method="session" if auth.via == "session" else "token",
        scopes=None if principal.scopes is None else sorted(principal.scopes),
        csrf_token=auth.csrf_token,
    )


# --- personal access tokens ----------------------------------------------------------------------


@router.post(
    "/api/me/tokens",
    status_code=status.HTTP_201_CREATED,
    response_model=PatCreated,
    responses=errors_for(401, 403, 422, InsufficientScope),
)
def create_token(body: PatIn, request: Request, principal: UserDep, session: SessionDep) -> PatCreated:
    """Mint a PAT (``kbpat_...``), shown once. Only from a signed-in session (a token can't mint
    tokens: 403 ``INSUFFICIENT_SCOPE``); unknown scope -> 422."""
    row, plaintext = tokens.create_pat(
        session,
        principal,
        name=body.name,
        scopes=list(body.scopes),
        expires_at=body.expires_at,
        ip=client_ip(request),
        user_agent=user_agent(request),
    )
    return PatCreated(id=row.id, token=plaintext, name=row.name, scopes=list(row.scopes), expires_at=row.expires_at)


@router.get("/api/me/tokens", response_model=PatList, responses=error_responses(401))
def list_tokens(principal: UserDep, session: SessionDep) -> PatList:
    return PatList(items=[PatOut.of(t) for t in tokens.list_pats(session, principal)])


@router.delete(
    "/api/me/tokens/{token_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=error_responses(401, 403, 404, 422),
)
def revoke_token(token_id: uuid.UUID, request: Request, principal: UserDep, session: SessionDep) -> Response:
    """Revoke; the token fails on its next use. Another user's token is 404."""
    tokens.revoke_pat(session, principal, token_id, ip=client_ip(request), user_agent=user_agent(request))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
