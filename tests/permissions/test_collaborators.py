"""Collaborators, workspace members, ownership transfer and permission settings: all audited."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from openkb.errors import NotFound, PermissionDenied, ValidationError
from openkb.models import AuditLog, Collaborator, WorkspaceMember
from openkb.permissions import can_edit_document, can_read_document, resolve_effective_role
from openkb.permissions.collaborators import (
    add_collaborator,
    list_collaborators,
    remove_collaborator,
    transfer_owner,
    update_collaborator,
)
from openkb.permissions.members import add_workspace_member, change_workspace_member_role, remove_workspace_member
from openkb.permissions.settings import update_document_access, update_knowledge_base_access
from tests.factories import make_doc, make_group, make_kb, make_user


def _audit(db, action):
    return (
        db.execute(select(AuditLog).where(AuditLog.action == action).order_by(AuditLog.created_at.desc()))
        .scalars()
        .first()
    )


def test_add_update_remove_collaborator(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner)
    c = add_collaborator(
        db, P(w.owner), ("knowledge_base", kb.id), subject_type="user", subject_id=w.member.id, role="viewer"
    )
    assert can_read_document(db, P(w.member), doc.id) and not can_edit_document(db, P(w.member), doc.id)
    log = _audit(db, "collaborator.add")
    assert log.actor_user_id == w.owner.id and log.meta["after"] == {"role": "viewer"}
    update_collaborator(db, P(w.owner), c.id, role="editor")
    assert can_edit_document(db, P(w.member), doc.id)
    assert _audit(db, "collaborator.update").meta["before"] == {"role": "viewer"}
    listed = list_collaborators(db, P(w.owner), kb)
    assert [x.subject_id for x in listed.rows] == [w.owner.id, w.member.id] and listed.with_emails
    with pytest.raises(PermissionDenied):  # listing them is managing them (docs/permissions.md#collaborators)
        list_collaborators(db, P(w.member), kb)
    with pytest.raises(PermissionDenied):  # editors do not manage collaborators
        add_collaborator(db, P(w.member), kb, subject_type="user", subject_id=w.guest.id, role="viewer")
    with pytest.raises(NotFound):
        add_collaborator(db, P(w.outsider), kb, subject_type="user", subject_id=w.guest.id, role="viewer")
    remove_collaborator(db, P(w.owner), c.id)
    assert not can_read_document(db, P(w.member), doc.id)
    assert _audit(db, "collaborator.remove").meta["after"] == {"role": None}


def test_owner_is_never_granted_ordinarily(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    with pytest.raises(ValidationError):
        add_collaborator(db, P(w.owner), kb, subject_type="user", subject_id=w.member.id, role="owner")
    owner_row = db.execute(select(Collaborator).where(Collaborator.object_id == kb.id)).scalar_one()
    with pytest.raises(ValidationError):
        update_collaborator(db, P(w.owner), owner_row.id, role="viewer")
    with pytest.raises(ValidationError):
        remove_collaborator(db, P(w.owner), owner_row.id)
    with pytest.raises(ValidationError):
        add_workspace_member(db, P(w.owner), w.workspace.id, user_id=w.outsider.id, role="owner")


def test_grants_stay_inside_the_tenant_and_on_custom_documents(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    with pytest.raises(NotFound):
        add_collaborator(db, P(w.owner), kb, subject_type="user", subject_id=w.other_tenant_user.id, role="viewer")
    inherit_doc = make_doc(db, kb, w.owner)
    with pytest.raises(ValidationError):
        add_collaborator(db, P(w.owner), inherit_doc, subject_type="user", subject_id=w.member.id, role="viewer")
    g = make_group(db, w.tenant, w.owner, members=[w.guest])
    custom = make_doc(db, kb, w.owner, permission_mode="custom")
    add_collaborator(db, P(w.owner), custom, subject_type="group", subject_id=g.id, role="viewer")
    assert can_read_document(db, P(w.guest), custom.id)


def test_transfer_owner_is_owner_only_and_audited(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    add_collaborator(db, P(w.owner), kb, subject_type="user", subject_id=w.member.id, role="manager")
    with pytest.raises(PermissionDenied):
        transfer_owner(db, P(w.member), kb, new_owner_id=w.member.id)
    transfer_owner(db, P(w.owner), kb, new_owner_id=w.member.id)
    assert resolve_effective_role(db, P(w.member), kb) == "owner"
    assert resolve_effective_role(db, P(w.owner), kb) == "manager"
    log = _audit(db, "owner.transfer")
    assert log.object_id == kb.id and log.meta["after"]["owner"] == str(w.member.id)
    assert log.meta["before"]["owners"] == [f"user:{w.owner.id}"]
    # workspace ownership: the old owner becomes admin
    transfer_owner(db, P(w.owner), ("workspace", w.workspace.id), new_owner_id=w.admin.id)
    roles = dict(
        db.execute(
            select(WorkspaceMember.user_id, WorkspaceMember.role).where(WorkspaceMember.workspace_id == w.workspace.id)
        ).all()
    )
    assert roles[w.admin.id] == "owner" and roles[w.owner.id] == "admin"
    with pytest.raises(ValidationError):  # the new owner must be in the workspace already
        transfer_owner(db, P(w.admin), ("workspace", w.workspace.id), new_owner_id=w.outsider.id)


def test_workspace_members_service(db, w, P):
    newcomer = make_user(db, w.tenant)
    m = add_workspace_member(db, P(w.admin), w.workspace.id, user_id=newcomer.id, role="guest")
    assert m.role == "guest" and _audit(db, "workspace_member.add").meta["after"] == {"role": "guest"}
    change_workspace_member_role(db, P(w.admin), w.workspace.id, user_id=newcomer.id, role="member")
    with pytest.raises(PermissionDenied):
        change_workspace_member_role(db, P(w.member), w.workspace.id, user_id=newcomer.id, role="admin")
    with pytest.raises(ValidationError):
        change_workspace_member_role(db, P(w.admin), w.workspace.id, user_id=w.owner.id, role="member")
    with pytest.raises(NotFound):
        add_workspace_member(db, P(w.outsider), w.workspace.id, user_id=newcomer.id, role="member")
    remove_workspace_member(db, P(w.owner), w.workspace.id, user_id=newcomer.id)
    assert _audit(db, "workspace_member.remove").meta["before"] == {"role": "member"}


def test_permission_settings_are_manager_only_and_audited(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner)
    with pytest.raises(NotFound):
        update_knowledge_base_access(db, P(w.member), kb.id, visibility="public")
    update_knowledge_base_access(db, P(w.owner), kb.id, visibility="workspace", editor_can_delete=True)
    assert can_read_document(db, P(w.member), doc.id)
    log = _audit(db, "permission.knowledge_base.update")
    assert log.meta["before"]["visibility"] == "private" and log.meta["after"]["editor_can_delete"] is True
    update_document_access(db, P(w.owner), doc.id, permission_mode="custom", visibility="private")
    assert not can_read_document(db, P(w.member), doc.id)
    assert _audit(db, "permission.document.update").meta["after"] == {
        "permission_mode": "custom",
        "visibility": "private",
    }
    with pytest.raises(ValidationError):
        update_document_access(db, P(w.owner), doc.id, permission_mode="locked")
