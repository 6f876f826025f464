"""Invitations (docs/permissions.md#invitations): role sets by object type, accept/approve/reset/close."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from openkb.errors import NotFound, PermissionDenied, Unauthenticated, ValidationError
from openkb.models import AuditLog, Collaborator, Invitation, WorkspaceMember
from openkb.permissions import Principal, can_read_document
from openkb.permissions.invitations import (
    InvitationExhausted,
    InvitationExpired,
    accept_invitation,
    approve_invitation_request,
    create_invitation,
    decline_invitation,
    get_invitation,
    reject_invitation_request,
    reset_invitation,
    revoke_invitation,
)
from openkb.security import hash_token
from tests.factories import make_doc, make_kb, make_tenant, make_user


def _actions(db, object_id) -> list[str]:
    return [
        a.action
        for a in db.execute(
            select(AuditLog).where(AuditLog.object_id == object_id).order_by(AuditLog.created_at)
        ).scalars()
    ]


def test_workspace_invitation_role_constraints(db, w, P):
    ws = ("workspace", w.workspace.id)
    for role in ("owner", "manager", "editor", "viewer", "superuser"):
        with pytest.raises(ValidationError):
            create_invitation(db, P(w.owner), ws, role=role)
    for role in ("admin", "member", "guest"):
        assert create_invitation(db, P(w.admin), ws, role=role).invitation.role == role
    with pytest.raises(PermissionDenied):
        create_invitation(db, P(w.member), ws, role="member")
    with pytest.raises(NotFound):
        create_invitation(db, P(w.outsider), ws, role="member")
    # the database refuses an owner invitation even if a service forgot to check
    with pytest.raises(IntegrityError), db.begin_nested():
        db.add(
            Invitation(
                tenant_id=w.tenant.id,
                object_type="workspace",
                object_id=w.workspace.id,
                role="owner",
                token_hash="x-owner",
                invited_by=w.owner.id,
            )
        )
        db.flush()


def test_workspace_invitation_writes_workspace_members(db, w, P):
    created = create_invitation(db, P(w.owner), ("workspace", w.workspace.id), role="guest")
    newcomer = make_user(db, w.tenant)
    result = accept_invitation(db, created.token, P(newcomer))
    assert result.status == "accepted" and isinstance(result.membership, WorkspaceMember)
    assert result.membership.role == "guest"
    assert db.execute(select(Collaborator).where(Collaborator.subject_id == newcomer.id)).first() is None
    assert accept_invitation(db, created.token, P(newcomer)).status == "accepted"  # idempotent
    # accepting never demotes: the admin stays admin
    assert accept_invitation(db, created.token, P(w.admin)).membership.role == "admin"
    assert _actions(db, w.workspace.id)[:2] == ["invitation.create", "invitation.accept"]


def test_content_invitation_role_constraints(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner, permission_mode="custom")
    for obj in (("knowledge_base", kb.id), ("document", doc.id)):
        for role in ("owner", "admin", "member", "guest"):
            with pytest.raises(ValidationError):
                create_invitation(db, P(w.owner), obj, role=role)
        for role in ("manager", "editor", "viewer"):
            assert create_invitation(db, P(w.owner), obj, role=role).invitation.role == role
    with pytest.raises(ValidationError):  # an inherit document has no collaborators of its own
        create_invitation(db, P(w.owner), ("document", make_doc(db, kb, w.owner).id), role="viewer")
    with pytest.raises(IntegrityError), db.begin_nested():
        db.add(
            Invitation(
                tenant_id=w.tenant.id,
                object_type="document",
                object_id=doc.id,
                role="owner",
                token_hash="y-owner",
                invited_by=w.owner.id,
            )
        )
        db.flush()


def test_content_invitation_writes_collaborators(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner)
    created = create_invitation(db, P(w.owner), ("knowledge_base", kb.id), role="editor")
    result = accept_invitation(db, created.token, P(w.member))
    assert isinstance(result.membership, Collaborator)
    assert (result.membership.role, result.membership.source) == ("editor", "invitation")
    assert can_read_document(db, P(w.member), doc.id)
    # the invitee's workspace role is untouched
    assert db.execute(select(WorkspaceMember.role).where(WorkspaceMember.user_id == w.member.id)).scalar() == "member"


def test_tokens_are_stored_hashed(db, w, P):
    created = create_invitation(db, P(w.owner), ("workspace", w.workspace.id), role="member")
    assert created.token.startswith("kbinv_")
    assert created.invitation.token_hash == hash_token(created.token) != created.token
    assert get_invitation(db, created.token).id == created.invitation.id


def test_expiry_max_uses_and_domains(db, w, P):
    ws = ("workspace", w.workspace.id)
    soon = create_invitation(db, P(w.owner), ws, role="member", expires_at=datetime.now(UTC) + timedelta(hours=1))
    soon.invitation.expires_at = datetime.now(UTC) - timedelta(seconds=1)
    db.add(soon.invitation)
    db.flush()
    with pytest.raises(InvitationExpired):
        accept_invitation(db, soon.token, P(make_user(db, w.tenant)))
    with pytest.raises(ValidationError):
        create_invitation(db, P(w.owner), ws, role="member", expires_at=datetime.now(UTC) - timedelta(hours=1))

    twice = create_invitation(db, P(w.owner), ws, role="member", max_uses=2)
    accept_invitation(db, twice.token, P(make_user(db, w.tenant)))
    accept_invitation(db, twice.token, P(make_user(db, w.tenant)))
    with pytest.raises(InvitationExhausted):
        accept_invitation(db, twice.token, P(make_user(db, w.tenant)))

    corp = create_invitation(db, P(w.owner), ws, role="member", allowed_email_domains=["@Corp.example"])
    with pytest.raises(PermissionDenied):
        accept_invitation(db, corp.token, P(make_user(db, w.tenant, email="x@gmail.example")))
    ok = accept_invitation(db, corp.token, P(make_user(db, w.tenant, email="y@corp.example")))
    assert ok.status == "accepted"


def test_targeted_invitation_is_for_that_person_only(db, w, P):
    created = create_invitation(
        db, P(w.owner), ("workspace", w.workspace.id), role="member", email="Invitee@Example.org"
    )
    with pytest.raises(PermissionDenied):
        accept_invitation(db, created.token, P(w.outsider))
    invitee = make_user(db, w.tenant, email="invitee@example.org")
    assert accept_invitation(db, created.token, P(invitee)).status == "accepted"
    assert created.invitation.status == "accepted"  # single use
    with pytest.raises(Unauthenticated):
        accept_invitation(db, created.token, Principal.anonymous(w.tenant.id))
    declined = create_invitation(
        db, P(w.owner), ("workspace", w.workspace.id), role="guest", invited_user_id=w.outsider.id
    )
    decline_invitation(db, declined.token, P(w.outsider))
    with pytest.raises(NotFound):
        accept_invitation(db, declined.token, P(w.outsider))


def test_approval_flow(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner)
    created = create_invitation(db, P(w.owner), ("knowledge_base", kb.id), role="viewer", require_approval=True)
    pending = accept_invitation(db, created.token, P(w.member))
    assert pending.status == "awaiting_approval" and pending.membership is None
    assert not can_read_document(db, P(w.member), doc.id)
    with pytest.raises(NotFound):  # the requester cannot approve themselves (cannot even see it)
        approve_invitation_request(db, P(w.member), pending.acceptance.id)
    approved = approve_invitation_request(db, P(w.owner), pending.acceptance.id)
    assert approved.membership.role == "viewer"
    assert can_read_document(db, P(w.member), doc.id)
    other = accept_invitation(db, created.token, P(w.guest))
    reject_invitation_request(db, P(w.owner), other.acceptance.id)
    assert not can_read_document(db, P(w.guest), doc.id)
    with pytest.raises(PermissionDenied):
        accept_invitation(db, created.token, P(w.guest))
    assert {"invitation.request_approval", "invitation.approve", "invitation.reject"} <= set(_actions(db, kb.id))


def test_reset_kills_the_old_token_and_revoke_closes(db, w, P):
    created = create_invitation(db, P(w.owner), ("workspace", w.workspace.id), role="member")
    fresh = reset_invitation(db, P(w.owner), created.invitation.id)
    assert fresh.token != created.token
    with pytest.raises(NotFound):
        accept_invitation(db, created.token, P(make_user(db, w.tenant)))
    accept_invitation(db, fresh.token, P(make_user(db, w.tenant)))
    revoke_invitation(db, P(w.owner), created.invitation.id)
    with pytest.raises(NotFound):
        accept_invitation(db, fresh.token, P(make_user(db, w.tenant)))
    with pytest.raises(PermissionDenied):
        revoke_invitation(db, P(w.member), created.invitation.id)
    assert {"invitation.reset", "invitation.revoke"} <= set(_actions(db, w.workspace.id))


def test_accepting_brings_a_user_into_the_tenant_but_never_across(db, w, P):
    other_tenant = make_tenant(db)
    stranger = make_user(db, other_tenant)
    created = create_invitation(db, P(w.owner), ("workspace", w.workspace.id), role="member")
    result = accept_invitation(db, created.token, Principal.user(stranger, w.tenant.id))
    assert result.membership.tenant_id == w.tenant.id
    from openkb.models import TenantMembership

    assert db.execute(
        select(TenantMembership).where(
            TenantMembership.user_id == stranger.id, TenantMembership.tenant_id == w.tenant.id
        )
    ).first()


def test_a_deleted_or_inactive_requester_is_never_approved(db, w, P):
    """Deleting a user closes their pending requests and the invitations addressed to them, and
    only an active requester is approved (docs/accounts.md#deleting-a-user)."""
    from openkb.accounts.deletion import delete_user
    from openkb.models import InvitationAcceptance

    link = create_invitation(db, P(w.owner), ("workspace", w.workspace.id), role="member", require_approval=True)
    gone, idle = make_user(db, w.tenant), make_user(db, w.tenant)
    gone_req = accept_invitation(db, link.token, P(gone)).acceptance
    idle_req = accept_invitation(db, link.token, P(idle)).acceptance
    targeted = create_invitation(db, P(w.owner), ("workspace", w.workspace.id), role="member", invited_user_id=gone.id)
    by_mail = create_invitation(db, P(w.owner), ("workspace", w.workspace.id), role="member", email=gone.email)

    delete_user(db, Principal.system(), gone.id)
    db.refresh(gone_req)
    assert gone_req.status == "rejected"
    for inv in (targeted.invitation, by_mail.invitation):
        db.refresh(inv)
        assert inv.status == "revoked"
    with pytest.raises(ValidationError):
        approve_invitation_request(db, P(w.owner), gone_req.id)

    idle.status = "suspended"
    db.add(idle)
    db.flush()
    with pytest.raises(ValidationError):
        approve_invitation_request(db, P(w.owner), idle_req.id)
    db.refresh(db.get(InvitationAcceptance, idle_req.id))
    assert db.get(InvitationAcceptance, idle_req.id).status == "awaiting_approval"  # decided once they are back
    members = db.exec(select(WorkspaceMember.user_id).where(WorkspaceMember.workspace_id == w.workspace.id)).all()
    assert gone.id not in {m for (m,) in members} and idle.id not in {m for (m,) in members}
