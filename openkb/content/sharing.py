"""Change-log rows for the permission writes made through the sharing routes.

The permission service (``openkb.permissions``) authorizes, writes and audits collaborators,
invitations and share links; this module calls it and records the ``changes`` row every write
gets, so those writes are listed and reverted like content writes:

* ``collaborator.add`` <-> ``collaborator.remove``; ``collaborator.update`` back to the old role;
* ``invitation.create`` and ``share_link.create`` are reverted by revoking; a revoke itself is
  not revertible (a closed link stays closed: create a new one).

The change-log object of a grant is the (object, subject) pair, not the row id, so a grant that
is removed and added again is one history.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlmodel import Session, col, select

from openkb.content.actor import Actor
from openkb.content.changes import record_change
from openkb.errors import NotFound
from openkb.models import Change, Collaborator, Document, Invitation, ShareLink
from openkb.permissions import ObjectRef
from openkb.permissions import collaborators as collab_service
from openkb.permissions import invitations as invite_service
from openkb.permissions import share_links as link_service


def grant_key(object_id: uuid.UUID, subject_type: str, subject_id: uuid.UUID) -> uuid.UUID:
    return uuid.uuid5(object_id, f"{subject_type}:{subject_id}")


def _scope(session: Session, object_type: str, object_id: uuid.UUID) -> dict[str, Any]:
    if object_type == "knowledge_base":
        return {"knowledge_base_id": object_id}
    if object_type == "workspace":
        return {"workspace_id": object_id}
    doc = session.get(Document, object_id)
    return {"knowledge_base_id": doc.knowledge_base_id, "workspace_id": doc.workspace_id} if doc else {}


def _grant_state(
    object_type: str, object_id: uuid.UUID, subject_type: str, subject_id: uuid.UUID, role: str | None
) -> dict[str, Any]:
    return {
        "object_type": object_type,
        "object_id": object_id,
        "subject_type": subject_type,
        "subject_id": subject_id,
        "role": role,
    }


def _existing_role(session: Session, ref: ObjectRef, subject_type: str, subject_id: uuid.UUID) -> str | None:
    return session.exec(
        select(Collaborator.role).where(
            col(Collaborator.object_type) == ref.object_type,
            col(Collaborator.object_id) == ref.object_id,
            col(Collaborator.subject_type) == subject_type,
            col(Collaborator.subject_id) == subject_id,
        )
    ).first()


def add_collaborator(
    session: Session,
    actor: Actor,
    ref: ObjectRef,
    *,
    subject_type: str,
    subject_id: uuid.UUID,
    role: str,
    reverts: Change | None = None,
) -> Collaborator:
    before = _existing_role(session, ref, subject_type, subject_id)
    row = collab_service.add_collaborator(
        session, actor.principal, ref, subject_type=subject_type, subject_id=subject_id, role=role
    )
    if before != row.role:
        record_change(
            session,
            actor,
            op="collaborator.add" if before is None else "collaborator.update",
            object_type="collaborator",
            object_id=grant_key(ref.object_id, subject_type, subject_id),
            summary=f"{'granted' if before is None else 'changed'} {row.role} on {ref.object_type}",
            scope=_scope(session, ref.object_type, ref.object_id),
            before=_grant_state(ref.object_type, ref.object_id, subject_type, subject_id, before),
            after=_grant_state(ref.object_type, ref.object_id, subject_type, subject_id, row.role),
            reverts=reverts,
        )
    return row


def update_collaborator(
    session: Session, actor: Actor, collaborator_id: uuid.UUID, *, role: str, reverts: Change | None = None
) -> Collaborator:
    row = session.get(Collaborator, collaborator_id)
    before = row.role if row else None
    row = collab_service.update_collaborator(session, actor.principal, collaborator_id, role=role)
    if before != row.role:
        record_change(
            session,
            actor,
            op="collaborator.update",
            object_type="collaborator",
            object_id=grant_key(row.object_id, row.subject_type, row.subject_id),
            summary=f"changed {before} -> {row.role} on {row.object_type}",
            scope=_scope(session, row.object_type, row.object_id),
            before=_grant_state(row.object_type, row.object_id, row.subject_type, row.subject_id, before),
            after=_grant_state(row.object_type, row.object_id, row.subject_type, row.subject_id, row.role),
            reverts=reverts,
        )
    return row


def remove_collaborator(
    session: Session, actor: Actor, collaborator_id: uuid.UUID, *, reverts: Change | None = None
) -> None:
    row = session.get(Collaborator, collaborator_id)
    snap = (row.object_type, row.object_id, row.subject_type, row.subject_id, row.role) if row else None
    collab_service.remove_collaborator(session, actor.principal, collaborator_id)
    assert snap is not None  # the service raised NotFound otherwise
    otype, oid, stype, sid, role = snap
    record_change(
        session,
        actor,
        op="collaborator.remove",
        object_type="collaborator",
        object_id=grant_key(oid, stype, sid),
        summary=f"removed {role} on {otype}",
        scope=_scope(session, otype, oid),
        before=_grant_state(otype, oid, stype, sid, role),
        after=_grant_state(otype, oid, stype, sid, None),
        reverts=reverts,
    )


def _collaborator_id(session: Session, state: dict[str, Any]) -> uuid.UUID:
    cid = session.exec(
        select(Collaborator.id).where(
            col(Collaborator.object_type) == state["object_type"],
            col(Collaborator.object_id) == state["object_id"],
            col(Collaborator.subject_type) == state["subject_type"],
            col(Collaborator.subject_id) == state["subject_id"],
        )
    ).first()
    if cid is None:
        raise NotFound("collaborator not found")
    return cid


def revert_grant(session: Session, actor: Actor, c: Change) -> None:
    b = c.before_state
    if c.op == "collaborator.add":
        remove_collaborator(session, actor, _collaborator_id(session, c.after_state), reverts=c)
    elif c.op == "collaborator.update":
        update_collaborator(session, actor, _collaborator_id(session, c.after_state), role=b["role"], reverts=c)
    else:  # collaborator.remove
        add_collaborator(
            session,
            actor,
            ObjectRef(b["object_type"], uuid.UUID(b["object_id"])),
            subject_type=b["subject_type"],
            subject_id=uuid.UUID(b["subject_id"]),
            role=b["role"],
            reverts=c,
        )


# -- invitations and share links ----------------------------------------------------------------


def create_invitation(session: Session, actor: Actor, ref: ObjectRef, **kw: Any) -> invite_service.CreatedInvitation:
    created = invite_service.create_invitation(session, actor.principal, ref, **kw)
    inv = created.invitation
    record_change(
        session,
        actor,
        op="invitation.create",
        object_type="invitation",
        object_id=inv.id,
        summary=f"invited as {inv.role} to {ref.object_type}",
        scope=_scope(session, ref.object_type, ref.object_id),
        before={},
        after={"status": inv.status, "role": inv.role, "email": inv.email},
    )
    return created


def revoke_invitation(
    session: Session, actor: Actor, invitation_id: uuid.UUID, *, reverts: Change | None = None
) -> Invitation:
    before = session.get(Invitation, invitation_id)
    status = before.status if before else None
    inv = invite_service.revoke_invitation(session, actor.principal, invitation_id)
    if status != inv.status:
        record_change(
            session,
            actor,
            op="invitation.revoke",
            object_type="invitation",
            object_id=inv.id,
            summary="revoked an invitation",
            scope=_scope(session, inv.object_type, inv.object_id),
            before={"status": status},
            after={"status": inv.status},
            reverts=reverts,
        )
    return inv


def create_share_link(session: Session, actor: Actor, ref: ObjectRef, **kw: Any) -> link_service.CreatedShareLink:
    created = link_service.create_share_link(
        session, actor.principal, ref, ip=actor.ip, user_agent=actor.user_agent, **kw
    )
    link = created.link
    record_change(
        session,
        actor,
        op="share_link.create",
        object_type="share_link",
        object_id=link.id,
        summary=f"shared a {ref.object_type} by link",
        scope=_scope(session, ref.object_type, ref.object_id),
        before={},
        after={"revoked_at": None, "has_password": link.password_hash is not None},
    )
    return created


def revoke_share_link(
    session: Session, actor: Actor, link_id: uuid.UUID, *, reverts: Change | None = None
) -> ShareLink:
    before = session.get(ShareLink, link_id)
    was_open = before is not None and before.revoked_at is None
    link = link_service.revoke_share_link(session, actor.principal, link_id, ip=actor.ip, user_agent=actor.user_agent)
    if was_open:
        record_change(
            session,
            actor,
            op="share_link.revoke",
            object_type="share_link",
            object_id=link.id,
            summary="closed a share link",
            scope=_scope(session, link.object_type, link.object_id),
            before={"revoked_at": None},
            after={"revoked_at": link.revoked_at},
            reverts=reverts,
        )
    return link


def transfer_owner(session: Session, actor: Actor, ref: ObjectRef, *, new_owner_id: uuid.UUID) -> None:
    """Recorded, not revertible by the old owner (only the new owner can transfer it back)."""
    collab_service.transfer_owner(
        session, actor.principal, ref, new_owner_id=new_owner_id, ip=actor.ip, user_agent=actor.user_agent
    )
    record_change(
        session,
        actor,
        op="owner.transfer",
        object_type=ref.object_type,
        object_id=ref.object_id,
        summary=f"transferred ownership of the {ref.object_type}",
        scope=_scope(session, ref.object_type, ref.object_id),
        before={"owner": actor.principal.user_id},
        after={"owner": new_owner_id},
    )


def record_invitation_event(
    session: Session,
    actor: Actor,
    op: str,
    inv: Invitation,
    *,
    user_id: uuid.UUID | None = None,
    status: str | None = None,
) -> None:
    """accept / approve / reject / decline / reset: recorded, not revertible (the grant they made
    is removed as a collaborator or member, which is itself recorded)."""
    record_change(
        session,
        actor,
        op=op,
        object_type="invitation",
        object_id=inv.id,
        summary=f"{op.split('.', 1)[1]} invitation ({inv.object_type}, {inv.role})",
        scope=_scope(session, inv.object_type, inv.object_id),
        before={},
        after={"user_id": user_id, "status": status or inv.status, "role": inv.role},
    )
