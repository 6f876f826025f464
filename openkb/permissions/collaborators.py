"""Collaborators of knowledge bases and documents (docs/permissions.md#collaborators) and ownership transfer.

Ordinary grants give manager/editor/viewer only; ``owner`` comes from creation or from
``transfer_owner`` (owner-only, audited). A grant never demotes an existing stronger role and
never touches an owner row. Collaborators of a document count only while it is in ``custom``
permission mode, so adding them to an inherit-mode document is refused.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlmodel import Session

from openkb.audit import record_audit
from openkb.errors import NotFound, PermissionDenied, ValidationError
from openkb.models import Collaborator, Group, TenantMembership, User, WorkspaceMember
from openkb.models.enums import CONTENT_INVITE_ROLES, SUBJECT_TYPES, WORKSPACE_INVITE_ROLES
from openkb.permissions import rules
from openkb.permissions.guards import authorize, content_ref
from openkb.permissions.principal import Principal
from openkb.permissions.service import ObjectRef, as_ref


def check_content_role(role: str) -> None:
    if role == "owner":
        raise ValidationError("owner is granted only by creation or transfer_owner")
    if role not in CONTENT_INVITE_ROLES:
        raise ValidationError(f"content roles are {', '.join(CONTENT_INVITE_ROLES)}; got {role!r}")


def check_workspace_role(role: str) -> None:
    if role == "owner":
        raise ValidationError("workspace owner is granted only by creation or transfer_owner")
    if role not in WORKSPACE_INVITE_ROLES:
        raise ValidationError(f"workspace roles are {', '.join(WORKSPACE_INVITE_ROLES)}; got {role!r}")


def check_subject(session: Session, tenant_id: uuid.UUID, subject_type: str, subject_id: uuid.UUID) -> None:
    """The subject exists in the object's tenant (a grant never crosses tenants)."""
    if subject_type not in SUBJECT_TYPES:
        raise ValidationError(f"subject_type must be one of {SUBJECT_TYPES}")
    if subject_type == "group":
        g = session.get(Group, subject_id)
        ok = g is not None and g.tenant_id == tenant_id
    else:
        ok = (
            session.execute(
                select(TenantMembership.id)
                .join(User, User.id == TenantMembership.user_id)
                .where(
                    TenantMembership.user_id == subject_id,
                    TenantMembership.tenant_id == tenant_id,
                    User.status != "deleted",
                )
            ).first()
            is not None
        )
    if not ok:
        raise NotFound(f"{subject_type} not found")


def _row(session: Session, ref: ObjectRef, subject_type: str, subject_id: uuid.UUID) -> Collaborator | None:
    return session.execute(
        select(Collaborator).where(
            Collaborator.object_type == ref.object_type,
            Collaborator.object_id == ref.object_id,
            Collaborator.subject_type == subject_type,
            Collaborator.subject_id == subject_id,
        )
    ).scalar_one_or_none()


def do_grant(
    session: Session,
    *,
    tenant_id: uuid.UUID,
    ref: ObjectRef,
    subject_type: str,
    subject_id: uuid.UUID,
    role: str,
    source: str,
    created_by: uuid.UUID | None,
) -> tuple[Collaborator, str | None]:
    """Already-authorized grant: insert or raise to ``role``; returns (row, role before)."""
    row = _row(session, ref, subject_type, subject_id)
    before = row.role if row else None
    if row is None:
        row = Collaborator(
            tenant_id=tenant_id,
            object_type=ref.object_type,
            object_id=ref.object_id,
            subject_type=subject_type,
            subject_id=subject_id,
            role=role,
            source=source,
            created_by=created_by,
        )
    elif rules.rank(role) > rules.rank(row.role):
        row.role = role
    session.add(row)
    session.flush()
    return row, before


def do_add_workspace_member(
    session: Session, *, tenant_id: uuid.UUID, workspace_id: uuid.UUID, user_id: uuid.UUID, role: str
) -> tuple[WorkspaceMember, str | None]:
    """Already-authorized: add a member or raise their role (never demotes, never owner)."""
    order = {"guest": 1, "member": 2, "admin": 3, "owner": 4}
    row = session.execute(
        select(WorkspaceMember).where(WorkspaceMember.workspace_id == workspace_id, WorkspaceMember.user_id == user_id)
    ).scalar_one_or_none()
    before = row.role if row else None
    if row is None:
        row = WorkspaceMember(tenant_id=tenant_id, workspace_id=workspace_id, user_id=user_id, role=role)
    elif order[role] > order[row.role]:
        row.role = role
    session.add(row)
    session.flush()
    return row, before


def _audit(
    session: Session, principal: Principal, action: str, tenant_id: uuid.UUID, ref: ObjectRef, **meta: Any
) -> None:
    record_audit(
        session,
        tenant_id=tenant_id,
        actor=principal,
        action=action,
        object_type=ref.object_type,
        object_id=ref.object_id,
        metadata=meta,
    )


@dataclass(frozen=True)
class CollaboratorListing:
    rows: list[Collaborator]
    with_emails: bool  # the subjects' email addresses may be shown (managers only)


def list_collaborators(session: Session, principal: Principal, obj: Any) -> CollaboratorListing:
    """The object's collaborators, for those who manage them (docs/permissions.md#collaborators,
    #capability-matrix): reading an object is not a reason to learn who else holds it and their
    email addresses (a public knowledge base is read by anonymous visitors and other tenants).

    One exception, without emails: a signed-in user of the object's tenant who may create share
    links on it (an editor when ``editor_can_create_share_links``) opens the same share dialog,
    which shows who already has access. Everyone else gets the usual answers: ``NotFound`` when
    they cannot see the object, ``PermissionDenied`` when they only read it."""
    ref = content_ref(obj)
    try:
        authorize(session, principal, ref, "manage")
        with_emails = True
    except PermissionDenied:
        if principal.kind != "user":
            raise
        try:
            auth = authorize(session, principal, ref, "share")
        except PermissionDenied:
            raise PermissionDenied("only managers can list the collaborators") from None
        if auth.tenant_id != principal.tenant_id:  # roles never cross tenants; kept explicit
            raise PermissionDenied("only managers can list the collaborators") from None
        with_emails = False
    rows = list(
        session.execute(
            select(Collaborator)
            .where(
                Collaborator.object_type == ref.object_type,
                Collaborator.object_id == ref.object_id,
            )
            .order_by(Collaborator.created_at)
        ).scalars()
    )
    return CollaboratorListing(rows, with_emails)


def add_collaborator(
    session: Session, principal: Principal, obj: Any, *, subject_type: str, subject_id: uuid.UUID, role: str
) -> Collaborator:
    ref = content_ref(obj)
    check_content_role(role)
    auth = authorize(session, principal, ref, "manage")
    if ref.object_type == "document" and auth.permission_mode != "custom":
        raise ValidationError(
            "this document inherits its knowledge base's collaborators; switch it to custom permission mode first"
        )
    check_subject(session, auth.tenant_id, subject_type, subject_id)
    existing = _row(session, ref, subject_type, subject_id)
    if existing is not None and existing.role == "owner":
        raise ValidationError("the owner's role changes only by transfer_owner")
    # a grant raises a role or leaves it (docs/permissions.md#collaborators): granting "viewer"
    # to a manager, as a picker or a script may, must not demote them; lowering a role is
    # ``update_collaborator`` (PUT /api/collaborators/{id}, the share panel's role select)
    row, before = do_grant(
        session,
        tenant_id=auth.tenant_id,
        ref=ref,
        subject_type=subject_type,
        subject_id=subject_id,
        role=role,
        source="direct",
        created_by=principal.user_id,
    )
    if before == row.role:
        return row  # nothing changed: nothing to audit
    _audit(
        session,
        principal,
        "collaborator.add" if before is None else "collaborator.update",
        auth.tenant_id,
        ref,
        collaborator_id=row.id,
        subject_type=subject_type,
        subject_id=subject_id,
        before={"role": before},
        after={"role": row.role},
    )
    return row


def _load_collaborator(
    session: Session, principal: Principal, collaborator_id: uuid.UUID
) -> tuple[Collaborator, ObjectRef]:
    row = session.get(Collaborator, collaborator_id)
    if row is None:
        raise NotFound("collaborator not found")
    ref = ObjectRef(row.object_type, row.object_id)
    authorize(session, principal, ref, "manage")
    return row, ref


def update_collaborator(
    session: Session, principal: Principal, collaborator_id: uuid.UUID, *, role: str
) -> Collaborator:
    check_content_role(role)
    row, ref = _load_collaborator(session, principal, collaborator_id)
    if row.role == "owner":
        raise ValidationError("the owner's role changes only by transfer_owner")
    before = row.role
    row.role = role
    session.add(row)
    session.flush()
    _audit(
        session,
        principal,
        "collaborator.update",
        row.tenant_id,
        ref,
        collaborator_id=row.id,
        subject_type=row.subject_type,
        subject_id=row.subject_id,
        before={"role": before},
        after={"role": role},
    )
    return row


def remove_collaborator(session: Session, principal: Principal, collaborator_id: uuid.UUID) -> None:
    row, ref = _load_collaborator(session, principal, collaborator_id)
    if row.role == "owner":
        raise ValidationError("the owner cannot be removed; transfer ownership first")
    _audit(
        session,
        principal,
        "collaborator.remove",
        row.tenant_id,
        ref,
        collaborator_id=row.id,
        subject_type=row.subject_type,
        subject_id=row.subject_id,
        before={"role": row.role},
        after={"role": None},
    )
    session.delete(row)
    session.flush()


def transfer_owner(
    session: Session,
    principal: Principal,
    obj: Any,
    *,
    new_owner_id: uuid.UUID,
    ip: str | None = None,
    user_agent: str | None = None,
) -> None:
    """Owner-only. The previous owner stays as manager (workspace: admin). Audited."""
    ref = as_ref(obj)
    auth = authorize(session, principal, ref, "transfer_owner")
    if principal.user_id == new_owner_id:
        raise ValidationError("already the owner")
    check_subject(session, auth.tenant_id, "user", new_owner_id)
    new_user = session.get(User, new_owner_id)
    if new_user is None or new_user.status != "active":
        raise ValidationError("the new owner must be an active user")
    if ref.object_type == "workspace":
        rows = list(
            session.execute(
                select(WorkspaceMember).where(
                    WorkspaceMember.workspace_id == ref.object_id, WorkspaceMember.role == "owner"
                )
            ).scalars()
        )
        target = session.execute(
            select(WorkspaceMember).where(
                WorkspaceMember.workspace_id == ref.object_id, WorkspaceMember.user_id == new_owner_id
            )
        ).scalar_one_or_none()
        if target is None:
            raise ValidationError("the new owner must already be a member of the workspace")
        before = {"owners": [r.user_id for r in rows], "new_owner_role": target.role}
        for r in rows:
            r.role = "admin"
            session.add(r)
        target.role = "owner"
        session.add(target)
    else:
        if ref.object_type == "document" and auth.permission_mode != "custom":
            raise ValidationError("an inherit-mode document is owned through its knowledge base")
        rows = list(
            session.execute(
                select(Collaborator).where(
                    Collaborator.object_type == ref.object_type,
                    Collaborator.object_id == ref.object_id,
                    Collaborator.role == "owner",
                )
            ).scalars()
        )
        target = _row(session, ref, "user", new_owner_id)
        before = {
            "owners": [f"{r.subject_type}:{r.subject_id}" for r in rows],
            "new_owner_role": target.role if target else None,
        }
        for r in rows:
            r.role = "manager"
            session.add(r)
        if target is None:
            target = Collaborator(
                tenant_id=auth.tenant_id,
                object_type=ref.object_type,
                object_id=ref.object_id,
                subject_type="user",
                subject_id=new_owner_id,
                role="owner",
                source="transfer",
                created_by=principal.user_id,
            )
        target.role = "owner"
        target.source = "transfer"
        session.add(target)
    session.flush()
    record_audit(
        session,
        tenant_id=auth.tenant_id,
        actor=principal,
        action="owner.transfer",
        object_type=ref.object_type,
        object_id=ref.object_id,
        ip=ip,
        user_agent=user_agent,
        metadata={
            "before": before,
            "after": {
                "owner": new_owner_id,
                "previous_owners_now": "admin" if ref.object_type == "workspace" else "manager",
            },
        },
    )
