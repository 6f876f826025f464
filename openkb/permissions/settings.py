"""Permission settings of knowledge bases and documents: visibility, the two configurable cells
of docs/permissions.md#capability-matrix, and a document's permission mode. Manager+ only; every change is audited with
before/after. (Changing them also changes chunks' access fields: re-index the affected documents.)
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlmodel import Session

from openkb.audit import record_audit
from openkb.errors import ValidationError
from openkb.models import Document, KnowledgeBase
from openkb.models.enums import PERMISSION_MODES, VISIBILITIES
from openkb.permissions.access import access_document, access_knowledge_base
from openkb.permissions.principal import Principal
from openkb.permissions.rules import Action, KbAction

UNSET: Any = object()
KB_SETTING_KEYS = ("editor_can_delete", "editor_can_create_share_links")


def update_knowledge_base_access(
    session: Session,
    principal: Principal,
    kb_id: uuid.UUID,
    *,
    visibility: str | None = None,
    editor_can_delete: bool | None = None,
    editor_can_create_share_links: bool | None = None,
) -> KnowledgeBase:
    if visibility is not None and visibility not in VISIBILITIES:
        raise ValidationError(f"visibility must be one of {VISIBILITIES}")
    kb = access_knowledge_base(session, principal, kb_id, KbAction.MANAGE).knowledge_base
    before = {"visibility": kb.visibility, **{k: bool((kb.settings or {}).get(k, False)) for k in KB_SETTING_KEYS}}
    settings = dict(kb.settings or {})
    if editor_can_delete is not None:
        settings["editor_can_delete"] = bool(editor_can_delete)
    if editor_can_create_share_links is not None:
        settings["editor_can_create_share_links"] = bool(editor_can_create_share_links)
    kb.settings = settings
    if visibility is not None:
        kb.visibility = visibility
    after = {"visibility": kb.visibility, **{k: bool(settings.get(k, False)) for k in KB_SETTING_KEYS}}
    if after != before:
        session.add(kb)
        session.flush()
        record_audit(
            session,
            tenant_id=kb.tenant_id,
            actor=principal,
            action="permission.knowledge_base.update",
            object_type="knowledge_base",
            object_id=kb_id,
            metadata={"before": before, "after": after},
        )
    return kb


def update_document_access(
    session: Session,
    principal: Principal,
    document_id: uuid.UUID,
    *,
    permission_mode: str | None = None,
    visibility: str | None = UNSET,
) -> Document:
    """``visibility=None`` clears it (a custom document then keeps the visibility it inherits)."""
    if permission_mode is not None and permission_mode not in PERMISSION_MODES:
        raise ValidationError(f"permission_mode must be one of {PERMISSION_MODES}")
    if visibility is not UNSET and visibility is not None and visibility not in VISIBILITIES:
        raise ValidationError(f"visibility must be one of {VISIBILITIES}")
    doc = access_document(session, principal, document_id, Action.MANAGE).document
    before = {"permission_mode": doc.permission_mode, "visibility": doc.visibility}
    if permission_mode is not None:
        doc.permission_mode = permission_mode
    if visibility is not UNSET:
        doc.visibility = visibility
    after = {"permission_mode": doc.permission_mode, "visibility": doc.visibility}
    if after != before:
        session.add(doc)
        session.flush()
        record_audit(
            session,
            tenant_id=doc.tenant_id,
            actor=principal,
            action="permission.document.update",
            object_type="document",
            object_id=document_id,
            metadata={"before": before, "after": after},
        )
    return doc
