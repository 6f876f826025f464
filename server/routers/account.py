"""/api/me/profile, /api/me/password, /api/me/sessions: the signed-in user's own account.

Thin adapter over ``openkb.accounts.account`` (the web app's "My account" page, docs/web.md).
A token can't change the profile or password or manage sessions: these need the cookie
session (``_session_id``), like minting tokens (403 ``INSUFFICIENT_SCOPE``).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter, Response, status
from pydantic import BaseModel, Field

from openkb.accounts import account
from openkb.errors import InsufficientScope, NotFound, RateLimited
from server.auth import AuthDep, UserDep, require_user
from server.deps import SessionDep
from server.errors import error_responses, errors_for
from server.routers.auth import Body, UserOut

router = APIRouter(tags=["auth"])


class ProfileIn(Body):
    display_name: str = Field(min_length=1, max_length=1000)
    time_zone: str | None = Field(
        None, max_length=64, description="IANA name (Asia/Shanghai); null or empty: UTC; left as is when absent"
    )


class PasswordChangeIn(Body):
    current_password: str = Field(min_length=1, max_length=1024)
    new_password: str = Field(min_length=8, max_length=1024)


class PasswordChangeOut(BaseModel):
    sessions_revoked: int = Field(description="other sessions signed out by the change")


class SessionOut(BaseModel):
    id: uuid.UUID
    ip: str | None
    user_agent: str | None
    created_at: datetime
    last_seen_at: datetime
    expires_at: datetime
    current: bool = Field(description="the session making this request")


class SessionList(BaseModel):
    items: list[SessionOut]


class RevokedOut(BaseModel):
    sessions_revoked: int


def _session_id(auth: AuthDep):  # noqa: ANN202 - uuid.UUID
    """The cookie session of the call; a bearer token may not manage sessions or passwords."""
    require_user(auth)
    if auth.session_id is None:
        raise InsufficientScope("sign in with a browser session to manage your account")
    return auth.session_id


@router.put("/api/me/profile", response_model=UserOut, responses=errors_for(401, 403, 422, InsufficientScope))
def update_profile(body: ProfileIn, auth: AuthDep, principal: UserDep, session: SessionDep) -> UserOut:
    _session_id(auth)
    extra = {"time_zone": body.time_zone} if "time_zone" in body.model_fields_set else {}
    return UserOut.of(account.update_profile(session, principal, display_name=body.display_name, **extra))


@router.post(
    "/api/me/password",
    response_model=PasswordChangeOut,
    responses=errors_for(401, 403, 422, InsufficientScope, RateLimited),
)
def change_password(
    body: PasswordChangeIn, auth: AuthDep, principal: UserDep, session: SessionDep
) -> PasswordChangeOut:
    """422 ``VALIDATION_ERROR`` on ``current_password`` when it is wrong (429 after too many);
    every other session of the user is signed out, this one stays."""
    keep = _session_id(auth)
    killed = account.change_password(
        session, principal, current_password=body.current_password, new_password=body.new_password, keep_session_id=keep
    )
    return PasswordChangeOut(sessions_revoked=killed)


@router.get("/api/me/sessions", response_model=SessionList, responses=error_responses(401))
def list_sessions(auth: AuthDep, principal: UserDep, session: SessionDep) -> SessionList:
    """The caller's live sessions, most recently used first; ``current`` marks this one."""
    return SessionList(
        items=[
            SessionOut(
                id=r.id,
                ip=r.ip,
                user_agent=r.user_agent,
                created_at=r.created_at,
                last_seen_at=r.last_seen_at,
                expires_at=r.expires_at,
                current=r.id == auth.session_id,
            )
            for r in account.list_sessions(session, principal)
        ]
    )


@router.post(
    "/api/me/sessions/revoke-others",
    response_model=RevokedOut,
    responses=errors_for(401, 403, InsufficientScope),
)
def revoke_other_sessions(auth: AuthDep, principal: UserDep, session: SessionDep) -> RevokedOut:
    """Sign out everywhere else; the calling session stays."""
    keep = _session_id(auth)
    return RevokedOut(sessions_revoked=account.revoke_other_sessions(session, principal, keep))


@router.delete(
    "/api/me/sessions/{session_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=errors_for(401, 403, 422, NotFound, InsufficientScope),
)
def revoke_session(session_id: uuid.UUID, auth: AuthDep, principal: UserDep, session: SessionDep) -> Response:
    """Sign out one session (another user's id is 404)."""
    _session_id(auth)
    account.revoke_session(session, principal, session_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
