"""Delete a workspace or a knowledge base from its settings page (docs/web.md#settings): owner
only, and only once nothing is left in it to lose.

The data model has no trash or archive for workspaces (docs/data-model.md#workspaces-and-content):
knowledge bases are archived, pages go to the trash, but a workspace row that goes takes every
row below it by ``ON DELETE CASCADE``. So deletion is refused (409 CONFLICT, ``reason:
not_empty`` with the counts) while any knowledge base of the workspace still holds a page or
folder, trashed ones included: the owner empties the knowledge bases first (move pages to the
trash, purge), which goes through the change log and the index like any purge.

Traps:

* The workspace owner may not see every knowledge base in it (a private one created by a member),
  so the refusal gives counts, never titles (docs/permissions.md).
* Collaborator, invitation and share-link rows point at knowledge bases by (object_type,
  object_id) without a foreign key; they are removed here, or they would outlive their object.
* Audited ``workspace.deleted`` with what was removed; not revertable (nothing of value remains).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, func
from sqlmodel import Session, col, select

from openkb.audit import record_audit
from openkb.errors import Conflict
from openkb.models import Collaborator, Document, Invitation, KnowledgeBase, ShareLink, WorkspaceMember
from openkb.permissions import KbAction, Principal, WsAction, access_knowledge_base, access_workspace


def delete_workspace(session: Session, principal: Principal, workspace_id: uuid.UUID) -> dict[str, Any]:
    ws = access_workspace(session, principal, workspace_id, WsAction.DELETE).workspace
    kb_ids = list(session.exec(select(KnowledgeBase.id).where(col(KnowledgeBase.workspace_id) == ws.id)).all())
    docs = session.exec(select(func.count()).select_from(Document).where(col(Document.workspace_id) == ws.id)).one()
    if docs:
        raise Conflict(
            "the workspace still holds pages: empty its knowledge bases first (trash, then purge)",
            reason="not_empty",
            knowledge_bases=len(kb_ids),
            documents=int(docs),
        )
    members = session.exec(
        select(func.count()).select_from(WorkspaceMember).where(col(WorkspaceMember.workspace_id) == ws.id)
    ).one()
    if kb_ids:
        session.execute(
            delete(Collaborator).where(
                col(Collaborator.object_type) == "knowledge_base", col(Collaborator.object_id).in_(kb_ids)
            )
        )
        session.execute(
            delete(ShareLink).where(
                col(ShareLink.object_type) == "knowledge_base", col(ShareLink.object_id).in_(kb_ids)
            )
        )
    for object_type, ids in (("workspace", [ws.id]), ("knowledge_base", kb_ids)):
        if ids:
            session.execute(
                delete(Invitation).where(col(Invitation.object_type) == object_type, col(Invitation.object_id).in_(ids))
            )
    summary = {"name": ws.name, "slug": ws.slug, "knowledge_bases": len(kb_ids), "members": int(members)}
    session.delete(ws)  # members and the (empty) knowledge bases go by ON DELETE CASCADE
    session.flush()
    record_audit(
        session,
        tenant_id=ws.tenant_id,
        actor=principal,
        action="workspace.deleted",
        object_type="workspace",
        object_id=ws.id,
        metadata=summary,
    )
    return summary


def delete_knowledge_base(session: Session, principal: Principal, kb_id: uuid.UUID) -> dict[str, Any]:
    """The knowledge base's owner deletes it once it holds no page or folder (trash included):
    409 CONFLICT ``reason: not_empty`` with the count otherwise. Its collaborator, share-link and
    invitation rows go with it. Audited ``knowledge_base.deleted``."""
    kb = access_knowledge_base(session, principal, kb_id, KbAction.TRANSFER_OWNER).knowledge_base
    docs = session.exec(
        select(func.count()).select_from(Document).where(col(Document.knowledge_base_id) == kb.id)
    ).one()
    if docs:
        raise Conflict(
            "the knowledge base still holds pages: move them to the trash and purge them first",
            reason="not_empty",
            documents=int(docs),
        )
    for model in (Collaborator, ShareLink, Invitation):
        session.execute(delete(model).where(col(model.object_type) == "knowledge_base", col(model.object_id) == kb.id))
    summary = {"title": kb.title, "slug": kb.slug, "workspace_id": str(kb.workspace_id)}
    session.delete(kb)
    session.flush()
    record_audit(
        session,
        tenant_id=kb.tenant_id,
        actor=principal,
        action="knowledge_base.deleted",
        object_type="knowledge_base",
        object_id=kb.id,
        metadata=summary,
    )
    return summary


__all__ = ["delete_knowledge_base", "delete_workspace"]
