"""Fetch-and-authorize helpers shared by the permission-changing services.

``authorize`` answers in one query and raises the right error: ``NotFound`` when the caller
cannot see the object (indistinguishable from "does not exist"), ``PermissionDenied`` when
they can see it but not do this.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlmodel import Session

from openkb.errors import NotFound, PermissionDenied, ValidationError
from openkb.models import Document, KnowledgeBase, Workspace
from openkb.permissions import rules
from openkb.permissions.loader import load_snapshot
from openkb.permissions.principal import Principal
from openkb.permissions.rules import Action, KbAction
from openkb.permissions.service import ObjectRef, as_ref


@dataclass(frozen=True)
class Authorized:
    """The object an action was authorized on, with the ids services need."""

    ref: ObjectRef
    tenant_id: uuid.UUID
    workspace_id: uuid.UUID
    knowledge_base_id: uuid.UUID | None
    role: str | None              # caller's content role (kb/document) or workspace role
    permission_mode: str | None   # documents only


def authorize(session: Session, principal: Principal, obj: ObjectRef | tuple | Workspace | KnowledgeBase | Document,
              action: str) -> Authorized:
    ref = as_ref(obj)
    oid = str(ref.object_id)
    if ref.object_type == "workspace":
        snap = load_snapshot(session, principal, ws_ids=[oid])
        role = snap.viewer.ws_roles.get(oid) if principal.kind == "user" and snap.viewer.user_active else None
        if role is None:
            raise NotFound("workspace not found")
        ws = session.get(Workspace, ref.object_id)
        if ws is None or str(ws.tenant_id) != str(principal.tenant_id):
            raise NotFound("workspace not found")
        allowed = {"manage": rules.WORKSPACE_MANAGERS, "invite": rules.WORKSPACE_MANAGERS,
                   "transfer_owner": {"owner"}}.get(action)
        if allowed is None:
            raise ValidationError(f"unknown workspace action {action!r}")
        if role not in allowed or not principal.has_write_scope():
            raise PermissionDenied(f"not allowed to {action} this workspace")
        return Authorized(ref, ws.tenant_id, ws.id, None, role, None)
    if ref.object_type == "knowledge_base":
        act = KbAction(action)
        snap = load_snapshot(session, principal, kb_ids=[oid])
        kb = snap.kbs.get(oid)
        if kb is None or not rules.kb_allows(snap.viewer, kb, KbAction.READ):
            raise NotFound("knowledge base not found")
        if not rules.kb_allows(snap.viewer, kb, act):
            raise PermissionDenied(f"not allowed to {act.value} this knowledge base")
        return Authorized(ref, uuid.UUID(kb.tenant_id), uuid.UUID(kb.workspace_id), uuid.UUID(kb.id),
                          rules.kb_role(snap.viewer, kb), None)
    if ref.object_type == "document":
        act = Action(action)
        snap = load_snapshot(session, principal, doc_ids=[oid])
        pl = rules.place(snap, oid)
        caps = rules.capabilities(snap.viewer, pl)
        if pl is None or not caps & {Action.READ, Action.TRASH}:
            raise NotFound("document not found")
        if act not in caps:
            raise PermissionDenied(f"not allowed to {act.value} this document")
        return Authorized(ref, uuid.UUID(pl.doc.tenant_id), uuid.UUID(pl.kb.workspace_id), uuid.UUID(pl.kb.id),
                          rules.document_role(snap.viewer, pl), pl.doc.mode)
    raise ValidationError(f"unknown object type {ref.object_type!r}")


def content_ref(obj: ObjectRef | tuple | KnowledgeBase | Document) -> ObjectRef:
    ref = as_ref(obj)
    if ref.object_type not in ("knowledge_base", "document"):
        raise ValidationError("collaborators exist on knowledge bases and documents only; "
                              "workspace roles live in workspace_members")
    return ref
