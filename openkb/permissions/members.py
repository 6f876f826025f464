"""Workspace membership (docs/permissions.md#roles): roles live in workspace_members, never in collaborators.

Owners and admins manage members; ``owner`` is never granted here (creation or
``collaborators.transfer_owner`` only), and the owner row cannot be changed or removed here.
"""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlmodel import Session

from openkb.audit import record_audit
from openkb.errors import NotFound, ValidationError
from openkb.models import WorkspaceMember
from openkb.permissions.collaborators import check_subject, check_workspace_role, do_add_workspace_member
from openkb.permissions.guards import authorize
from openkb.permissions.principal import Principal
from openkb.permissions.service import ObjectRef


def _member(session: Session, workspace_id: uuid.UUID, user_id: uuid.UUID) -> WorkspaceMember:
    row = session.execute(
        select(WorkspaceMember).where(WorkspaceMember.workspace_id == workspace_id, WorkspaceMember.user_id == user_id)
    ).scalar_one_or_none()
    if row is None:
        raise NotFound("member not found")
    return row


def add_workspace_member(
    session: Session, principal: Principal, workspace_id: uuid.UUID, *, user_id: uuid.UUID, role: str
) -> WorkspaceMember:
    check_workspace_role(role)
    ref = ObjectRef("workspace", workspace_id)
    auth = authorize(session, principal, ref, "manage")
    check_subject(session, auth.tenant_id, "user", user_id)
    existing = session.execute(
        select(WorkspaceMember).where(WorkspaceMember.workspace_id == workspace_id, WorkspaceMember.user_id == user_id)
    ).scalar_one_or_none()
    if existing is not None:
        return change_workspace_member_role(session, principal, workspace_id, user_id=user_id, role=role)
    row, _ = do_add_workspace_member(
        session, tenant_id=auth.tenant_id, workspace_id=workspace_id, user_id=user_id, role=role
    )
    record_audit(
        session,
        tenant_id=auth.tenant_id,
        actor=principal,
        action="workspace_member.add",
        object_type="workspace",
        object_id=workspace_id,
        metadata={"user_id": user_id, "before": {"role": None}, "after": {"role": role}},
    )
    return row


def change_workspace_member_role(
    session: Session, principal: Principal, workspace_id: uuid.UUID, *, user_id: uuid.UUID, role: str
) -> WorkspaceMember:
    check_workspace_role(role)
    auth = authorize(session, principal, ObjectRef("workspace", workspace_id), "manage")
    row = _member(session, workspace_id, user_id)
    if row.role == "owner":
        raise ValidationError("the workspace owner changes only by transfer_owner")
    before = row.role
    row.role = role
    session.add(row)
    session.flush()
    record_audit(
        session,
        tenant_id=auth.tenant_id,
        actor=principal,
        action="workspace_member.update",
        object_type="workspace",
        object_id=workspace_id,
        metadata={"user_id": user_id, "before": {"role": before}, "after": {"role": role}},
    )
    return row


def remove_workspace_member(
    session: Session, principal: Principal, workspace_id: uuid.UUID, *, user_id: uuid.UUID
) -> None:
    """Removes the membership only; the person's collaborator grants stay (they are separate)."""
    auth = authorize(session, principal, ObjectRef("workspace", workspace_id), "manage")
    row = _member(session, workspace_id, user_id)
    if row.role == "owner":
        raise ValidationError("the workspace owner cannot be removed; transfer ownership first")
    record_audit(
        session,
        tenant_id=auth.tenant_id,
        actor=principal,
        action="workspace_member.remove",
        object_type="workspace",
        object_id=workspace_id,
        metadata={"user_id": user_id, "before": {"role": row.role}, "after": {"role": None}},
    )
    session.delete(row)
    session.flush()
