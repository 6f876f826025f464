"""Collaborators, invitations and share links (docs/permissions.md) over ``openkb.permissions``.

Those services authorize, audit and write; these routes parse, call them and shape the answer.
Share links are read-only (docs/permissions.md#share-links). A password-protected link is opened with
``POST /api/share/{token}/verify-password``, which returns a short-lived share-access token
(also set as a cookie) to send as ``X-Share-Access`` on ``GET /api/share/{token}`` and the reads
below it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Cookie, Header, Path, Query, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field

from openkb.accounts.directory import SubjectLabel, subject_labels
from openkb.content import Actor, share_access, share_view
from openkb.content import sharing as recorded
from openkb.errors import (
    EmailDomainNotAllowed,
    InvalidToken,
    InvitationExhausted,
    InvitationExpired,
    NotFound,
    RegistrationDisabled,
    SharePasswordIncorrect,
    SharePasswordRequired,
    ValidationError,
)
from openkb.models import Invitation, ShareLink
from openkb.permissions import ObjectRef, Principal
from openkb.permissions import collaborators as collab_service
from openkb.permissions import invitations as invite_service
from openkb.permissions import share_links as link_service
from openkb.permissions.candidates import collaborator_candidates
from server.auth import PrincipalDep, UserDep, client_ip, user_agent
from server.deps import CtxDep, SessionDep
from server.errors import error_responses, errors_for
from server.routers.content import ActorDep
from server.schemas import RequestModel

router = APIRouter(tags=["sharing"])

SHARE_COOKIE = "openkb_share_access"
ContentType = Literal["knowledge_base", "document"]
TokenPath = Annotated[str, Path(min_length=1, max_length=200)]
InviteType = Literal["workspace", "knowledge_base", "document"]
_ERR = error_responses(401, 403, 404, 409, 410, 422, 429)
_SHARE = errors_for(_ERR, SharePasswordRequired, SharePasswordIncorrect)  # 429 after too many wrong passwords
_ACCEPT = errors_for(
    _ERR, InvitationExpired, InvitationExhausted, InvalidToken, RegistrationDisabled, EmailDomainNotAllowed
)  # with ``account``: registration through the invitation


class Out(BaseModel):
    model_config = ConfigDict(extra="allow")


# --- collaborators ------------------------------------------------------------------------------


class CollaboratorIn(RequestModel):
    subject_type: Literal["user", "group"] = "user"
    subject_id: uuid.UUID
    role: Literal["manager", "editor", "viewer"]


class CollaboratorUpdate(RequestModel):
    role: Literal["manager", "editor", "viewer"]


class CollaboratorOut(Out):
    id: uuid.UUID
    object_type: str
    object_id: uuid.UUID
    subject_type: str
    subject_id: uuid.UUID
    role: str
    source: str
    created_at: datetime
    subject_name: str | None = Field(None, description="the user's display name or the group's name")
    subject_email: str | None = Field(
        None, description="the user's email (null for a group, and in lists for callers who do not manage the object)"
    )


class CollaboratorList(BaseModel):
    items: list[CollaboratorOut]


class TransferIn(RequestModel):
    user_id: uuid.UUID


def _collab(
    c: Any, labels: dict[tuple[str, uuid.UUID], SubjectLabel] | None = None, *, with_email: bool = True
) -> dict[str, Any]:
    label = (labels or {}).get((c.subject_type, c.subject_id))
    return {
        "subject_name": label.name if label else None,
        "subject_email": label.email if label and with_email else None,
        "id": c.id,
        "object_type": c.object_type,
        "object_id": c.object_id,
        "subject_type": c.subject_type,
        "subject_id": c.subject_id,
        "role": c.role,
        "source": c.source,
        "created_by": c.created_by,
        "created_at": c.created_at,
    }


@router.get("/api/objects/{object_type}/{object_id}/collaborators", response_model=CollaboratorList, responses=_ERR)
def list_collaborators(
    object_type: ContentType, object_id: uuid.UUID, session: SessionDep, principal: PrincipalDep
) -> dict[str, Any]:
    """For the object's managers; an editor who may create share links gets the names without
    emails (openkb/permissions/collaborators.py ``list_collaborators``)."""
    listing = collab_service.list_collaborators(session, principal, ObjectRef(object_type, object_id))
    labels = subject_labels(session, ((c.subject_type, c.subject_id) for c in listing.rows))
    return {"items": [_collab(c, labels, with_email=listing.with_emails) for c in listing.rows]}


class CandidateOut(BaseModel):
    subject_type: Literal["user", "group"]
    subject_id: uuid.UUID
    name: str
    email: str | None = Field(None, description="the user's email (null for a group)")


class CandidateList(BaseModel):
    items: list[CandidateOut]


@router.get(
    "/api/objects/{object_type}/{object_id}/collaborator-candidates", response_model=CandidateList, responses=_ERR
)
def list_collaborator_candidates(
    object_type: ContentType,
    object_id: uuid.UUID,
    session: SessionDep,
    principal: PrincipalDep,
    q: Annotated[str, Query(max_length=200)] = "",
) -> dict[str, Any]:
    """The share panel's picker, for the object's managers: members of its workspace and groups of
    its tenant whose name or email contains ``q`` (openkb/permissions/candidates.py)."""
    found = collaborator_candidates(session, principal, ObjectRef(object_type, object_id), q)
    return {"items": [vars(c) for c in found]}


@router.post(
    "/api/objects/{object_type}/{object_id}/collaborators",
    status_code=status.HTTP_201_CREATED,
    response_model=CollaboratorOut,
    responses=_ERR,
)
def add_collaborator(
    object_type: ContentType, object_id: uuid.UUID, body: CollaboratorIn, session: SessionDep, actor: ActorDep
) -> dict[str, Any]:
    """manager/editor/viewer only (owner comes from creation or transfer). A document must be in
    custom permission mode to have its own collaborators. For an existing collaborator this raises
    the role or leaves it (a grant never demotes); ``PUT /api/collaborators/{id}`` lowers one."""
    row = recorded.add_collaborator(
        session,
        actor,
        ObjectRef(object_type, object_id),
        subject_type=body.subject_type,
        subject_id=body.subject_id,
        role=body.role,
    )
    return _collab(row, subject_labels(session, [(row.subject_type, row.subject_id)]))


@router.put("/api/collaborators/{collaborator_id}", response_model=CollaboratorOut, responses=_ERR)
def update_collaborator(
    collaborator_id: uuid.UUID, body: CollaboratorUpdate, session: SessionDep, actor: ActorDep
) -> dict[str, Any]:
    row = recorded.update_collaborator(session, actor, collaborator_id, role=body.role)
    return _collab(row, subject_labels(session, [(row.subject_type, row.subject_id)]))


@router.delete(
    "/api/collaborators/{collaborator_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=_ERR,
)
def remove_collaborator(collaborator_id: uuid.UUID, session: SessionDep, actor: ActorDep) -> Response:
    recorded.remove_collaborator(session, actor, collaborator_id)
    return Response(status_code=204)


@router.post(
    "/api/objects/{object_type}/{object_id}/transfer-owner",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=_ERR,
)
def transfer_owner(
    object_type: InviteType, object_id: uuid.UUID, body: TransferIn, session: SessionDep, actor: ActorDep
) -> Response:
    """Owner only; the previous owner becomes manager (workspace: admin). Audited."""
    recorded.transfer_owner(session, actor, ObjectRef(object_type, object_id), new_owner_id=body.user_id)
    return Response(status_code=204)


# --- invitations --------------------------------------------------------------------------------


class InvitationIn(RequestModel):
    role: Literal["admin", "member", "guest", "manager", "editor", "viewer"] = Field(
        description="workspace: admin/member/guest; knowledge base / document: manager/editor/viewer"
    )
    email: str | None = Field(None, max_length=320, description="targeted, single-use; mailed")
    user_id: uuid.UUID | None = Field(None, description="targeted at an existing user, single-use")
    require_approval: bool = False
    allowed_email_domains: list[Annotated[str, Field(max_length=255)]] | None = Field(None, max_length=100)
    expires_at: datetime | None = None
    max_uses: int | None = Field(None, ge=1, le=1_000_000)


class InvitationOut(Out):
    id: uuid.UUID
    object_type: str
    object_id: uuid.UUID
    role: str
    status: str
    require_approval: bool
    expires_at: datetime | None
    max_uses: int | None
    used_count: int


class CreatedInvitationOut(InvitationOut):
    token: str = Field(description="shown once")
    url: str


class InvitationView(Out):
    object_type: str
    object_id: uuid.UUID
    object_title: str | None = Field(description="null once the invitation is used up or expired")
    role: str
    status: str
    require_approval: bool
    expires_at: datetime | None
    targeted: bool


class RegisterAndAccept(RequestModel):
    email: str = Field(min_length=3, max_length=320)
    password: str = Field(min_length=8, max_length=1024)
    display_name: str | None = Field(None, min_length=1, max_length=1000)


class AcceptIn(RequestModel):
    account: RegisterAndAccept | None = Field(None, description="not signed in: create the account and accept")


class AcceptOut(Out):
    status: str = Field(description="accepted | awaiting_approval | registered (finish sign-up first)")
    object_type: str
    object_id: uuid.UUID
    role: str


class RequestOut(Out):
    id: uuid.UUID
    invitation_id: uuid.UUID
    user_id: uuid.UUID
    status: str
    created_at: datetime


class RequestList(BaseModel):
    items: list[RequestOut]


class DecideIn(RequestModel):
    request_id: uuid.UUID | None = Field(None, description="the pending request (see .../requests)")
    user_id: uuid.UUID | None = Field(None, description="or the requesting user")


def _inv(inv: Invitation) -> dict[str, Any]:
    return {
        "id": inv.id,
        "object_type": inv.object_type,
        "object_id": inv.object_id,
        "role": inv.role,
        "email": inv.email,
        "invited_user_id": inv.invited_user_id,
        "status": inv.status,
        "require_approval": inv.require_approval,
        "allowed_email_domains": inv.allowed_email_domains,
        "expires_at": inv.expires_at,
        "max_uses": inv.max_uses,
        "used_count": inv.used_count,
        "invited_by": inv.invited_by,
        "created_at": inv.created_at,
    }


def _request(acc: Any) -> dict[str, Any]:
    return {
        "id": acc.id,
        "invitation_id": acc.invitation_id,
        "user_id": acc.user_id,
        "status": acc.status,
        "decided_by": acc.decided_by,
        "decided_at": acc.decided_at,
        "created_at": acc.created_at,
    }


@router.post(
    "/api/objects/{object_type}/{object_id}/invitations",
    status_code=status.HTTP_201_CREATED,
    response_model=CreatedInvitationOut,
    responses=_ERR,
)
def create_invitation(
    object_type: InviteType, object_id: uuid.UUID, body: InvitationIn, session: SessionDep, actor: ActorDep, ctx: CtxDep
) -> dict[str, Any]:
    """An invitation link (optionally for one email/user, with approval, domains, expiry, uses).
    An ``email`` invitation is mailed by the service once this request commits."""
    created = recorded.create_invitation(
        session,
        actor,
        ObjectRef(object_type, object_id),
        role=body.role,
        email=body.email,
        invited_user_id=body.user_id,
        require_approval=body.require_approval,
        allowed_email_domains=body.allowed_email_domains,
        expires_at=body.expires_at,
        max_uses=body.max_uses,
        ctx=ctx,
    )
    url = invite_service.invitation_url(ctx.settings, created.token)
    return {**_inv(created.invitation), "token": created.token, "url": url}


class ListedInvitationOut(InvitationOut):
    email: str | None
    invited_user_id: uuid.UUID | None
    allowed_email_domains: list[str] | None
    expired: bool = Field(description="past expires_at (status may still read pending)")
    pending_requests: int = Field(description="acceptances awaiting approval")
    created_by: uuid.UUID
    created_at: datetime


class InvitationList(BaseModel):
    items: list[ListedInvitationOut]


InvitationStatus = Literal["pending", "accepted", "rejected", "expired", "revoked", "awaiting_approval"]


@router.get("/api/objects/{object_type}/{object_id}/invitations", response_model=InvitationList, responses=_ERR)
def list_invitations(
    object_type: InviteType,
    object_id: uuid.UUID,
    session: SessionDep,
    principal: PrincipalDep,
    status_: Annotated[InvitationStatus | None, Query(alias="status")] = None,
) -> dict[str, Any]:
    """The object's invitations, for those who may invite on it (workspace owner/admin, manager+
    of the knowledge base or document). Never the token: it is shown once, at creation."""
    rows = invite_service.list_invitations(session, principal, ObjectRef(object_type, object_id), status=status_)
    pending = invite_service.pending_request_counts(session, [i.id for i in rows])
    now = datetime.now(UTC)
    return {
        "items": [
            {
                **_inv(i),
                "created_by": i.invited_by,
                "pending_requests": pending.get(i.id, 0),
                "expired": i.expires_at is not None and i.expires_at <= now,
            }
            for i in rows
        ]
    }


@router.get("/api/invitations/{token}", response_model=InvitationView, responses=_ERR)
def get_invitation(token: TokenPath, session: SessionDep) -> dict[str, Any]:
    """The landing page of an invitation link (what it grants). Dead links are 404; a used-up or
    expired one answers without ``object_title``."""
    inv = invite_service.get_invitation(session, token)
    return {
        "object_type": inv.object_type,
        "object_id": inv.object_id,
        "object_title": invite_service.landing_title(session, inv),
        "role": inv.role,
        "status": inv.status,
        "require_approval": inv.require_approval,
        "expires_at": inv.expires_at,
        "targeted": inv.email is not None or inv.invited_user_id is not None,
    }


@router.post("/api/invitations/{token}/accept", response_model=AcceptOut, responses=_ACCEPT)
def accept_invitation(
    token: TokenPath,
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
    ctx: CtxDep,
    body: AcceptIn | None = None,
) -> dict[str, Any]:
    """Signed in: accept (or request approval). Not signed in: pass ``account`` to create the
    account through the invitation (the same path as ``POST /api/auth/register`` with
    ``invitation_token``); if the account still has to verify its email, ``status`` is
    ``registered`` and the invitation was accepted for it."""
    if principal.kind != "user":
        if body is None or body.account is None:
            from openkb.errors import Unauthenticated

            raise Unauthenticated("sign in, or pass 'account' to create an account with this invitation")
        from openkb.accounts import registration

        inv = invite_service.get_invitation(session, token)
        r = registration.register(
            session,
            ctx,
            email=body.account.email,
            password=body.account.password,
            display_name=body.account.display_name,
            invitation_token=token,
            ip=client_ip(request),
            user_agent=user_agent(request),
        )
        got = r.invitation or {}
        return {
            "status": got.get("status") or "registered",
            "object_type": inv.object_type,
            "object_id": inv.object_id,
            "role": inv.role,
            "user_id": r.user.id,
        }
    res = invite_service.accept_invitation(session, token, principal)
    recorded.record_invitation_event(
        session,
        Actor.of(principal, request.headers.get("x-run-id")),
        "invitation.accept",
        res.invitation,
        user_id=principal.user_id,
        status=res.status,
    )
    return {
        "status": res.status,
        "object_type": res.invitation.object_type,
        "object_id": res.invitation.object_id,
        "role": res.invitation.role,
        "request_id": res.acceptance.id,
    }


@router.post(
    "/api/invitations/{token}/decline",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=errors_for(_ERR, InvitationExpired, InvitationExhausted),
)
def decline_invitation(token: TokenPath, session: SessionDep, actor: ActorDep) -> Response:
    inv = invite_service.decline_invitation(session, token, actor.principal)
    recorded.record_invitation_event(session, actor, "invitation.decline", inv, user_id=actor.principal.user_id)
    return Response(status_code=204)


@router.get("/api/invitations/{invitation_id}/requests", response_model=RequestList, responses=_ERR)
def list_requests(invitation_id: uuid.UUID, session: SessionDep, principal: UserDep) -> dict[str, Any]:
    """Pending approval requests of an invitation (managers of its object)."""
    return {"items": [_request(a) for a in invite_service.list_invitation_requests(session, principal, invitation_id)]}


def _acceptance_id(session: SessionDep, principal: Principal, invitation_id: uuid.UUID, body: DecideIn) -> uuid.UUID:
    if body.request_id is not None:
        return body.request_id
    if body.user_id is None:
        raise ValidationError("give request_id or user_id", field="request_id")
    for acc in invite_service.list_invitation_requests(session, principal, invitation_id):
        if acc.user_id == body.user_id:
            return acc.id
    raise NotFound("no pending request from this user")


@router.post("/api/invitations/{invitation_id}/approve", response_model=RequestOut, responses=_ERR)
def approve(invitation_id: uuid.UUID, body: DecideIn, session: SessionDep, actor: ActorDep) -> dict[str, Any]:
    acc_id = _acceptance_id(session, actor.principal, invitation_id, body)
    res = invite_service.approve_invitation_request(session, actor.principal, acc_id)
    if res.invitation.id != invitation_id:
        raise NotFound("request not found")
    recorded.record_invitation_event(
        session, actor, "invitation.approve", res.invitation, user_id=res.acceptance.user_id, status="accepted"
    )
    return _request(res.acceptance)


@router.post("/api/invitations/{invitation_id}/reject", response_model=RequestOut, responses=_ERR)
def reject(invitation_id: uuid.UUID, body: DecideIn, session: SessionDep, actor: ActorDep) -> dict[str, Any]:
    acc_id = _acceptance_id(session, actor.principal, invitation_id, body)
    acc = invite_service.reject_invitation_request(session, actor.principal, acc_id)
    if acc.invitation_id != invitation_id:
        raise NotFound("request not found")
    inv = session.get(Invitation, invitation_id)
    if inv is not None:
        recorded.record_invitation_event(
            session, actor, "invitation.reject", inv, user_id=acc.user_id, status="rejected"
        )
    return _request(acc)


@router.post("/api/invitations/{invitation_id}/revoke", response_model=InvitationOut, responses=_ERR)
def revoke_invitation(invitation_id: uuid.UUID, session: SessionDep, actor: ActorDep) -> dict[str, Any]:
    return _inv(recorded.revoke_invitation(session, actor, invitation_id))


@router.post("/api/invitations/{invitation_id}/reset", response_model=CreatedInvitationOut, responses=_ERR)
def reset_invitation(invitation_id: uuid.UUID, session: SessionDep, actor: ActorDep, ctx: CtxDep) -> dict[str, Any]:
    """A new token; the old link stops working."""
    created = invite_service.reset_invitation(session, actor.principal, invitation_id)
    recorded.record_invitation_event(session, actor, "invitation.reset", created.invitation)
    url = invite_service.invitation_url(ctx.settings, created.token)
    return {**_inv(created.invitation), "token": created.token, "url": url}


# --- share links --------------------------------------------------------------------------------


class ShareLinkIn(RequestModel):
    permission: Literal["view"] = "view"
    password: str | None = Field(None, min_length=1, max_length=1024)
    require_login: bool = False
    restrict_to_workspace_members: bool = False
    expires_at: datetime | None = None


class ShareLinkOut(Out):
    id: uuid.UUID
    object_type: str
    object_id: uuid.UUID
    permission: str
    has_password: bool
    require_login: bool
    restrict_to_workspace_members: bool
    expires_at: datetime | None
    revoked_at: datetime | None
    created_at: datetime


class CreatedShareLinkOut(ShareLinkOut):
    token: str = Field(description="shown once")
    url: str


class ShareLinkList(BaseModel):
    items: list[ShareLinkOut]


class PasswordIn(RequestModel):
    password: str = Field(min_length=1, max_length=1024)


class ShareAccessOut(BaseModel):
    access_token: str
    token_type: Literal["share"] = "share"
    expires_at: datetime


class SharedOut(Out):
    link: ShareLinkOut
    document: dict[str, Any] | None
    knowledge_base: dict[str, Any] | None
    tree: list[dict[str, Any]]


@router.post(
    "/api/objects/{object_type}/{object_id}/share-links",
    status_code=status.HTTP_201_CREATED,
    response_model=CreatedShareLinkOut,
    responses=_ERR,
)
def create_share_link(
    object_type: ContentType, object_id: uuid.UUID, body: ShareLinkIn, session: SessionDep, actor: ActorDep, ctx: CtxDep
) -> dict[str, Any]:
    """Read-only links only (``permission`` is always ``view``)."""
    created = recorded.create_share_link(
        session,
        actor,
        ObjectRef(object_type, object_id),
        permission=body.permission,
        password=body.password,
        require_login=body.require_login,
        restrict_to_workspace_members=body.restrict_to_workspace_members,
        expires_at=body.expires_at,
    )
    url = f"{ctx.settings.app_base_url.rstrip('/')}/share/{created.token}"
    return {**share_view.link_out(created.link), "token": created.token, "url": url}


@router.get("/api/objects/{object_type}/{object_id}/share-links", response_model=ShareLinkList, responses=_ERR)
def list_share_links(
    object_type: ContentType, object_id: uuid.UUID, session: SessionDep, principal: UserDep
) -> dict[str, Any]:
    rows = link_service.list_share_links(session, principal, ObjectRef(object_type, object_id))
    return {"items": [share_view.link_out(r) for r in rows]}


@router.post("/api/share-links/{link_id}/revoke", response_model=ShareLinkOut, responses=_ERR)
def revoke_share_link(link_id: uuid.UUID, session: SessionDep, actor: ActorDep) -> dict[str, Any]:
    link = recorded.revoke_share_link(session, actor, link_id)
    return share_view.link_out(link)


AccessHeader = Annotated[
    str | None, Header(alias="X-Share-Access", max_length=200, description="share-access token from verify-password")
]
AccessCookie = Annotated[str | None, Cookie(alias=SHARE_COOKIE, max_length=200)]


def visitor_for(
    request: Request,
    session: SessionDep,
    token: str,
    principal: Principal,
    ctx: Any,
    header: str | None,
    cookie: str | None,
) -> tuple[Principal, ShareLink]:
    acc = share_view.open_link(
        session,
        token,
        viewer=principal,
        secret=ctx.settings.secret_key,
        access_token=header or cookie,
        ip=client_ip(request),
        user_agent=user_agent(request),
    )
    return acc.raise_for_status(), acc.link


@router.get("/api/share/{token}", response_model=SharedOut, responses=_SHARE)
def open_share(
    token: TokenPath,
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
    ctx: CtxDep,
    x_share_access: AccessHeader = None,
    share_cookie: AccessCookie = None,
) -> dict[str, Any]:
    """The linked object as its visitor sees it: a document (markdown + visible subtree) or a
    knowledge base (its visible tree). 401 ``SHARE_PASSWORD_REQUIRED`` until verify-password."""
    visitor, link = visitor_for(request, session, token, principal, ctx, x_share_access, share_cookie)
    return share_view.shared_object(session, visitor, link)


@router.get("/api/share/{token}/documents/{doc_id}", response_model=dict[str, Any], responses=_SHARE)
def open_shared_document(
    token: TokenPath,
    doc_id: uuid.UUID,
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
    ctx: CtxDep,
    x_share_access: AccessHeader = None,
    share_cookie: AccessCookie = None,
) -> dict[str, Any]:
    """A document inside the shared knowledge base or subtree."""
    visitor, _link = visitor_for(request, session, token, principal, ctx, x_share_access, share_cookie)
    return share_view.shared_document(session, visitor, doc_id)


@router.post("/api/share/{token}/verify-password", response_model=ShareAccessOut, responses=_SHARE)
def verify_password(
    token: TokenPath,
    body: PasswordIn,
    request: Request,
    response: Response,
    session: SessionDep,
    principal: PrincipalDep,
    ctx: CtxDep,
) -> dict[str, Any]:
    """Check the link's password (rate limited, audited) and get a 30-minute share-access token,
    also set as an HttpOnly cookie scoped to this link's URLs."""
    acc = link_service.open_share_link(
        session, token, password=body.password, viewer=principal, ip=client_ip(request), user_agent=user_agent(request)
    )
    acc.raise_for_status()  # a wrong password was counted and audited in its own transaction
    access, expires = share_access.issue(ctx.settings.secret_key, acc.link.id)
    response.set_cookie(
        SHARE_COOKIE,
        access,
        max_age=share_access.TTL_SECONDS,
        httponly=True,
        samesite="lax",
        secure=ctx.settings.app_base_url.startswith("https://"),
        path=f"/api/share/{token}",
    )
    return {"access_token": access, "expires_at": expires}
