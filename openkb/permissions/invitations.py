"""Invitations (docs/permissions.md#invitations): workspace -> workspace_members, content -> collaborators.

* Roles by object type: workspace admin/member/guest; knowledge base / document
  manager/editor/viewer. ``owner`` is refused here with a ValidationError, before the
  ``invitations_role_by_object`` CHECK would refuse it in the database.
* Targeted invitations (``email`` or ``invited_user_id``) are single-use and only that person
  may accept. Link invitations (neither) may be limited by ``max_uses``, ``expires_at`` and
  ``allowed_email_domains``.
* ``require_approval``: accepting records an ``InvitationAcceptance`` awaiting approval; a
  manager approves (grant written) or rejects. A use is counted when the acceptance is
  recorded, approved or not.
* ``reset_invitation`` swaps the token (the old link dies); ``revoke_invitation`` closes it.
* An invitation for an ``email`` is mailed by ``create_invitation`` itself, after the commit
  (a rolled-back request mails nothing); routes never mail.
* Accepting never demotes an existing membership/role and never touches an owner. A user who
  is not yet in the invitation's tenant joins it as ``member``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import func, select, text
from sqlmodel import Session

from openkb.audit import record_audit
from openkb.errors import (
    InvitationExhausted,
    InvitationExpired,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    ValidationError,
)
from openkb.models import (
    Collaborator,
    Document,
    Invitation,
    InvitationAcceptance,
    KnowledgeBase,
    TenantMembership,
    User,
    Workspace,
    WorkspaceMember,
)
from openkb.models.enums import INVITATION_STATUSES
from openkb.permissions.collaborators import (
    check_content_role,
    check_subject,
    check_workspace_role,
    do_add_workspace_member,
    do_grant,
)
from openkb.permissions.guards import authorize
from openkb.permissions.principal import Principal
from openkb.permissions.service import ObjectRef, as_ref
from openkb.security import hash_token, new_token

TOKEN_PREFIX = "kbinv"


@dataclass(frozen=True)
class CreatedInvitation:
    invitation: Invitation
    token: str  # plaintext, shown once; only its hash is stored


@dataclass(frozen=True)
class AcceptResult:
    status: Literal["accepted", "awaiting_approval"]
    invitation: Invitation
    acceptance: InvitationAcceptance
    membership: WorkspaceMember | Collaborator | None


def _now() -> datetime:
    return datetime.now(UTC)


def _action_for(ref: ObjectRef) -> str:
    return "invite" if ref.object_type in ("workspace", "knowledge_base") else "manage"


def _audit(session: Session, principal: Principal | None, action: str, inv: Invitation, **meta: Any) -> None:
    record_audit(
        session,
        tenant_id=inv.tenant_id,
        actor=principal,
        action=action,
        object_type=inv.object_type,
        object_id=inv.object_id,
        metadata={"invitation_id": inv.id, "role": inv.role, **meta},
    )


def _norm_domains(domains: list[str] | None) -> list[str] | None:
    if not domains:
        return None
    out = sorted({d.strip().lower().lstrip("@") for d in domains if d and d.strip()})
    return out or None


def invitation_url(settings: Any, token: str) -> str:
    """The link a person opens to accept (the web app's landing page)."""
    return f"{settings.app_base_url.rstrip('/')}/invitations/{token}"


def object_title(session: Session, object_type: str, object_id: uuid.UUID) -> str | None:
    model = {"workspace": Workspace, "knowledge_base": KnowledgeBase, "document": Document}[object_type]
    row = session.get(model, object_id)
    if row is None:
        return None
    return getattr(row, "name", None) or getattr(row, "title", None)


def _mail_invitation(session: Session, ctx: Any, inv: Invitation, token: str) -> None:
    from openkb.accounts.email_tokens import mail_after_commit

    assert inv.email is not None
    title = object_title(session, inv.object_type, inv.object_id) or "OpenKB"
    mail_after_commit(
        session,
        ctx,
        inv.email,
        f"You are invited to {title}",
        f"Hello,\n\nyou are invited to {title!r} on OpenKB as {inv.role}.\n\n"
        f"Open this link to accept:\n\n{invitation_url(ctx.settings, token)}\n",
    )


def create_invitation(
    session: Session,
    principal: Principal,
    obj: Any,
    *,
    role: str,
    email: str | None = None,
    invited_user_id: uuid.UUID | None = None,
    require_approval: bool = False,
    allowed_email_domains: list[str] | None = None,
    expires_at: datetime | None = None,
    max_uses: int | None = None,
    ctx: Any = None,
) -> CreatedInvitation:
    """Create an invitation link, audited ``invitation.create``.

    An ``email`` invitation is mailed to that address once the transaction commits (never
    for a rolled-back one). Trap: the mail needs ``ctx`` (the ``AppContext``: mailer and base
    URL); without it nothing is mailed, which only scripts and tests that mail nothing want.
    """
    ref = as_ref(obj)
    if ref.object_type == "workspace":
        check_workspace_role(role)
    else:
        check_content_role(role)
    if max_uses is not None and max_uses < 1:
        raise ValidationError("max_uses must be at least 1")
    if expires_at is not None and (expires_at.tzinfo is None or expires_at <= _now()):
        raise ValidationError("expires_at must be a future, timezone-aware time")
    auth = authorize(session, principal, ref, _action_for(ref))
    if ref.object_type == "document" and auth.permission_mode != "custom":
        raise ValidationError(
            "this document inherits its knowledge base's collaborators; "
            "invite to the knowledge base or switch the document to custom mode"
        )
    if invited_user_id is not None:
        check_subject(session, auth.tenant_id, "user", invited_user_id)
    targeted = email is not None or invited_user_id is not None
    plaintext, digest = new_token(TOKEN_PREFIX)
    inv = Invitation(
        tenant_id=auth.tenant_id,
        object_type=ref.object_type,
        object_id=ref.object_id,
        email=email.strip().lower() if email else None,
        invited_user_id=invited_user_id,
        role=role,
        token_hash=digest,
        status="pending",
        require_approval=require_approval,
        allowed_email_domains=_norm_domains(allowed_email_domains),
        invited_by=principal.user_id,
        expires_at=expires_at,
        max_uses=1 if targeted else max_uses,
    )
    session.add(inv)
    session.flush()
    _audit(
        session,
        principal,
        "invitation.create",
        inv,
        email=inv.email,
        invited_user_id=invited_user_id,
        require_approval=require_approval,
        max_uses=inv.max_uses,
        expires_at=expires_at,
        allowed_email_domains=inv.allowed_email_domains,
    )
    if inv.email and ctx is not None:
        _mail_invitation(session, ctx, inv, plaintext)
    return CreatedInvitation(inv, plaintext)


def get_invitation(session: Session, token: str) -> Invitation:
    """For the invitation landing page. Dead invitations (unknown, revoked, rejected) are NotFound."""
    inv = session.execute(select(Invitation).where(Invitation.token_hash == hash_token(token))).scalar_one_or_none()
    if inv is None or inv.status in ("revoked", "rejected"):
        raise NotFound("invitation not found")
    return inv


def landing_title(session: Session, inv: Invitation) -> str | None:
    """The object's title for the landing page, or None once nobody new can accept the
    invitation (used up, or past its expiry): its link is then only a forwarded or stale one,
    and whoever holds it learns nothing of what it was for. The page still answers (status, role)
    so the invitee who follows it again can sign in and be told it is theirs already
    (``accept_invitation`` answers a prior acceptance first). docs/permissions.md#invitations"""
    expired = inv.status == "expired" or (inv.expires_at is not None and inv.expires_at <= _now())
    if inv.status != "pending" or expired:
        return None
    return object_title(session, inv.object_type, inv.object_id)


def _user_for(session: Session, principal: Principal) -> User:
    if principal.kind != "user" or principal.user_id is None:
        raise Unauthenticated("log in to accept an invitation")
    user = session.get(User, principal.user_id)
    if user is None or user.status != "active":
        raise PermissionDenied("only active users can accept invitations")
    return user


def _check_usable(inv: Invitation, user: User) -> None:
    if inv.expires_at is not None and inv.expires_at <= _now() or inv.status == "expired":
        raise InvitationExpired("this invitation has expired")
    if inv.email is not None and inv.email != user.email.lower():
        raise PermissionDenied("this invitation was sent to another email address")
    if inv.invited_user_id is not None and inv.invited_user_id != user.id:
        raise PermissionDenied("this invitation was sent to someone else")
    if inv.allowed_email_domains:
        domain = user.email.rsplit("@", 1)[-1].lower()
        if domain not in inv.allowed_email_domains:
            raise PermissionDenied("your email domain is not allowed by this invitation")


def _consume_use(session: Session, inv: Invitation) -> None:
    got = session.execute(
        text(
            "UPDATE invitations SET used_count = used_count + 1 "
            "WHERE id = :id AND status = 'pending' AND (max_uses IS NULL OR used_count < max_uses) "
            "RETURNING used_count, max_uses"
        ),
        {"id": inv.id},
    ).first()
    if got is None:
        raise InvitationExhausted("this invitation has been used up")
    used, max_uses = got
    session.refresh(inv)
    if max_uses is not None and used >= max_uses:
        inv.status = "accepted"
        session.add(inv)
        session.flush()


def _grant(session: Session, inv: Invitation, user_id: uuid.UUID) -> tuple[WorkspaceMember | Collaborator, str | None]:
    if inv.object_type == "workspace":
        return do_add_workspace_member(
            session, tenant_id=inv.tenant_id, workspace_id=inv.object_id, user_id=user_id, role=inv.role
        )
    return do_grant(
        session,
        tenant_id=inv.tenant_id,
        ref=ObjectRef(inv.object_type, inv.object_id),
        subject_type="user",
        subject_id=user_id,
        role=inv.role,
        source="invitation",
        created_by=inv.invited_by,
    )


def _object_exists(session: Session, inv: Invitation) -> bool:
    model = {"workspace": Workspace, "knowledge_base": KnowledgeBase, "document": Document}[inv.object_type]
    row = session.get(model, inv.object_id)
    return row is not None and row.tenant_id == inv.tenant_id


def accept_invitation(session: Session, token: str, principal: Principal) -> AcceptResult:
    user = _user_for(session, principal)
    inv = get_invitation(session, token)
    if not _object_exists(session, inv):
        raise NotFound("invitation not found")
    prior = session.execute(
        select(InvitationAcceptance).where(
            InvitationAcceptance.invitation_id == inv.id, InvitationAcceptance.user_id == user.id
        )
    ).scalar_one_or_none()
    if prior is not None:
        if prior.status == "rejected":
            raise PermissionDenied("your request to join was rejected")
        return AcceptResult(prior.status, inv, prior, None)  # type: ignore[arg-type]
    if inv.status == "accepted":
        raise InvitationExhausted("this invitation has been used up")
    _check_usable(inv, user)
    _consume_use(session, inv)
    if (
        session.execute(
            select(TenantMembership.id).where(
                TenantMembership.tenant_id == inv.tenant_id, TenantMembership.user_id == user.id
            )
        ).first()
        is None
    ):
        session.add(TenantMembership(tenant_id=inv.tenant_id, user_id=user.id, role="member"))
        session.flush()
    if inv.require_approval:
        acc = InvitationAcceptance(
            tenant_id=inv.tenant_id, invitation_id=inv.id, user_id=user.id, status="awaiting_approval"
        )
        session.add(acc)
        session.flush()
        _audit(session, principal, "invitation.request_approval", inv, user_id=user.id)
        return AcceptResult("awaiting_approval", inv, acc, None)
    membership, before = _grant(session, inv, user.id)
    acc = InvitationAcceptance(
        tenant_id=inv.tenant_id, invitation_id=inv.id, user_id=user.id, status="accepted", decided_at=_now()
    )
    session.add(acc)
    session.flush()
    _audit(
        session,
        principal,
        "invitation.accept",
        inv,
        user_id=user.id,
        before={"role": before},
        after={"role": membership.role},
    )
    return AcceptResult("accepted", inv, acc, membership)


def decline_invitation(session: Session, token: str, principal: Principal) -> Invitation:
    """The invitee of a targeted invitation turns it down (link invitations are just ignored)."""
    user = _user_for(session, principal)
    inv = get_invitation(session, token)
    if inv.email is None and inv.invited_user_id is None:
        raise ValidationError("a link invitation cannot be declined; just don't use it")
    _check_usable(inv, user)
    if inv.status != "pending":
        raise ValidationError("this invitation is no longer pending")
    inv.status = "rejected"
    session.add(inv)
    session.flush()
    _audit(session, principal, "invitation.decline", inv, user_id=user.id)
    return inv


def _managed_invitation(session: Session, principal: Principal, invitation_id: uuid.UUID) -> Invitation:
    inv = session.get(Invitation, invitation_id)
    if inv is None or inv.tenant_id != principal.tenant_id:
        raise NotFound("invitation not found")
    ref = ObjectRef(inv.object_type, inv.object_id)
    authorize(session, principal, ref, _action_for(ref))
    return inv


def _decide(
    session: Session, principal: Principal, acceptance_id: uuid.UUID, approve: bool
) -> tuple[Invitation, InvitationAcceptance]:
    acc = session.get(InvitationAcceptance, acceptance_id)
    if acc is None:
        raise NotFound("request not found")
    inv = _managed_invitation(session, principal, acc.invitation_id)
    if acc.status != "awaiting_approval":
        raise ValidationError(f"this request is already {acc.status}")
    if approve:
        # Approval grants the role now: a suspended, unverified or deleted requester would get (or
        # get back, docs/accounts.md#deleting-a-user) a membership nobody meant. It stays pending.
        requester = session.get(User, acc.user_id)
        if requester is None or requester.status != "active":
            status = requester.status if requester is not None else "deleted"
            raise ValidationError(f"the requester's account is {status}, not active: the request cannot be approved")
    acc.status = "accepted" if approve else "rejected"
    acc.decided_by = principal.user_id
    acc.decided_at = _now()
    session.add(acc)
    if approve:
        inv.approved_by = principal.user_id
        session.add(inv)
    session.flush()
    return inv, acc


def approve_invitation_request(session: Session, principal: Principal, acceptance_id: uuid.UUID) -> AcceptResult:
    inv, acc = _decide(session, principal, acceptance_id, approve=True)
    if inv.status == "revoked" or not _object_exists(session, inv):
        raise ValidationError("the invitation was closed; the request can only be rejected")
    membership, before = _grant(session, inv, acc.user_id)
    _audit(
        session,
        principal,
        "invitation.approve",
        inv,
        user_id=acc.user_id,
        before={"role": before},
        after={"role": membership.role},
    )
    return AcceptResult("accepted", inv, acc, membership)


def reject_invitation_request(session: Session, principal: Principal, acceptance_id: uuid.UUID) -> InvitationAcceptance:
    inv, acc = _decide(session, principal, acceptance_id, approve=False)
    _audit(session, principal, "invitation.reject", inv, user_id=acc.user_id)
    return acc


def list_invitations(
    session: Session, principal: Principal, obj: Any, *, status: str | None = None
) -> list[Invitation]:
    """An object's invitations, for those who may invite on it (the same check as creating one:
    workspace owner/admin, manager+ of a knowledge base or custom document). Others get NotFound
    when they cannot see the object and PermissionDenied when they can. Callers must not show
    ``token_hash``: the token itself is never stored."""
    ref = as_ref(obj)
    if status is not None and status not in INVITATION_STATUSES:
        raise ValidationError(f"status must be one of {', '.join(INVITATION_STATUSES)}", field="status")
    authorize(session, principal, ref, _action_for(ref))
    q = select(Invitation).where(Invitation.object_type == ref.object_type, Invitation.object_id == ref.object_id)
    if status is not None:
        q = q.where(Invitation.status == status)
    return list(session.execute(q.order_by(Invitation.created_at, Invitation.id)).scalars())


def pending_request_counts(session: Session, invitation_ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
    """Requests awaiting approval per invitation, in one query (for the list view)."""
    if not invitation_ids:
        return {}
    rows = session.execute(
        select(InvitationAcceptance.invitation_id, func.count())
        .where(
            InvitationAcceptance.invitation_id.in_(invitation_ids),  # type: ignore[attr-defined]
            InvitationAcceptance.status == "awaiting_approval",
        )
        .group_by(InvitationAcceptance.invitation_id)
    ).all()
    return {iid: int(n) for iid, n in rows}


def list_invitation_requests(
    session: Session, principal: Principal, invitation_id: uuid.UUID
) -> list[InvitationAcceptance]:
    inv = _managed_invitation(session, principal, invitation_id)
    return list(
        session.execute(
            select(InvitationAcceptance)
            .where(
                InvitationAcceptance.invitation_id == inv.id,
                InvitationAcceptance.status == "awaiting_approval",
            )
            .order_by(InvitationAcceptance.created_at)
        ).scalars()
    )


def reset_invitation(session: Session, principal: Principal, invitation_id: uuid.UUID) -> CreatedInvitation:
    """New token; the old link stops working at once."""
    inv = _managed_invitation(session, principal, invitation_id)
    if inv.status != "pending":
        raise ValidationError(f"only a pending invitation can be reset (this one is {inv.status})")
    plaintext, digest = new_token(TOKEN_PREFIX)
    inv.token_hash = digest
    session.add(inv)
    session.flush()
    _audit(session, principal, "invitation.reset", inv)
    return CreatedInvitation(inv, plaintext)


def revoke_invitation(session: Session, principal: Principal, invitation_id: uuid.UUID) -> Invitation:
    """Close the invitation (its link dies). Access already granted stays."""
    inv = _managed_invitation(session, principal, invitation_id)
    before = inv.status
    if before != "revoked":
        inv.status = "revoked"
        session.add(inv)
        session.flush()
        _audit(session, principal, "invitation.revoke", inv, before={"status": before}, after={"status": "revoked"})
    return inv
