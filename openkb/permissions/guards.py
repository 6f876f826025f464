"""``authorize``: the ``access.py`` decision for an ``ObjectRef`` of any type, without a fetch.

The permission-changing services (collaborators, invitations, share links, members) act on
"this workspace, knowledge base or document" generically; ``authorize`` answers in one query
with the ``access_*`` errors: ``NotFound`` when the caller cannot see the object
(indistinguishable from "does not exist"), ``PermissionDenied`` when they can see it but not do
this. Services that need the row call ``access_*`` instead.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlmodel import Session

from openkb.errors import ValidationError
from openkb.models import Document, KnowledgeBase, Workspace
from openkb.permissions.access import check_document, check_knowledge_base, check_workspace
from openkb.permissions.principal import Principal
from openkb.permissions.rules import Action, KbAction, WsAction
from openkb.permissions.service import ObjectRef, as_ref


@dataclass(frozen=True)
class Authorized:
    """The object an action was authorized on, with the ids services need."""

    ref: ObjectRef
    tenant_id: uuid.UUID
    workspace_id: uuid.UUID
    knowledge_base_id: uuid.UUID | None
    role: str | None  # caller's content role (kb/document) or workspace role
    permission_mode: str | None  # documents only


def authorize(
    session: Session, principal: Principal, obj: ObjectRef | tuple | Workspace | KnowledgeBase | Document, action: str
) -> Authorized:
    """``check_*`` of ``access.py`` for any object type: the permission-changing services work on
    an ``ObjectRef`` and need ids, not rows, so nothing is fetched. Same errors as ``access_*``."""
    ref = as_ref(obj)
    if ref.object_type == "workspace":
        try:
            act = WsAction(action)
        except ValueError:
            raise ValidationError(f"unknown workspace action {action!r}") from None
        w = check_workspace(session, principal, ref.object_id, act)
        return Authorized(ref, w.tenant_id, w.id, None, w.role, None)
    if ref.object_type == "knowledge_base":
        k = check_knowledge_base(session, principal, ref.object_id, KbAction(action))
        kb = k.facts
        return Authorized(ref, uuid.UUID(kb.tenant_id), uuid.UUID(kb.workspace_id), uuid.UUID(kb.id), k.role, None)
    if ref.object_type == "document":
        d = check_document(session, principal, ref.object_id, Action(action))
        pl = d.placement
        return Authorized(
            ref, uuid.UUID(pl.doc.tenant_id), uuid.UUID(pl.kb.workspace_id), uuid.UUID(pl.kb.id), d.role, pl.doc.mode
        )
    raise ValidationError(f"unknown object type {ref.object_type!r}")


def content_ref(obj: ObjectRef | tuple | KnowledgeBase | Document) -> ObjectRef:
    ref = as_ref(obj)
    if ref.object_type not in ("knowledge_base", "document"):
        raise ValidationError(
            "collaborators exist on knowledge bases and documents only; workspace roles live in workspace_members"
        )
    return ref
