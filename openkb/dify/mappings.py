"""``dify_knowledge_mappings``: the "External Knowledge ID" a Dify user types -> a knowledge base.

The id Dify sends is an arbitrary string chosen in Dify's UI, so it is never trusted as a
knowledge base id: it is looked up here (per tenant; another tenant's mapping is invisible)
*before* the key's ``allowed_knowledge_base_ids`` is checked. Mapping a knowledge id grants
nothing by itself; only a key's allow-list does.

``do_map`` is an upsert: mapping an existing knowledge id again points it at the new knowledge
base and re-activates it (the adapter audits before/after).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, select

from openkb.dify.keys import resolve_kb
from openkb.errors import NotFound, ValidationError
from openkb.models import DifyKnowledgeMapping
from openkb.models._base import utcnow

MAX_KNOWLEDGE_ID = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def normalize_knowledge_id(value: str) -> str:
    """Dify sends the id verbatim; surrounding whitespace is a paste accident, not part of it."""
    v = (value or "").strip()
    if not v:
        raise ValidationError("knowledge id must not be empty", field="knowledge_id")
    if len(v) > MAX_KNOWLEDGE_ID or _CONTROL.search(v):
        raise ValidationError(f"knowledge id must be at most {MAX_KNOWLEDGE_ID} printable characters",
                              field="knowledge_id")
    return v


@dataclass(frozen=True)
class MapResult:
    row: DifyKnowledgeMapping
    created: bool
    before: dict[str, Any] | None


def do_map(session: Session, *, tenant_id: uuid.UUID, knowledge_id: str, kb: str | uuid.UUID,
           created_by: uuid.UUID | None = None) -> MapResult:
    kid = normalize_knowledge_id(knowledge_id)
    target = resolve_kb(session, tenant_id, str(kb))
    row = session.exec(select(DifyKnowledgeMapping).where(DifyKnowledgeMapping.tenant_id == tenant_id,
                                                          DifyKnowledgeMapping.dify_knowledge_id == kid)
                       .with_for_update()).first()
    if row is None:
        row = DifyKnowledgeMapping(tenant_id=tenant_id, dify_knowledge_id=kid, knowledge_base_id=target.id,
                                   status="active", created_by=created_by)
        session.add(row)
        session.flush()
        return MapResult(row, True, None)
    before = {"knowledge_base_id": str(row.knowledge_base_id), "status": row.status}
    row.knowledge_base_id = target.id
    row.status = "active"
    row.updated_at = utcnow()
    session.add(row)
    session.flush()
    return MapResult(row, False, before)


def list_mappings(session: Session, tenant_id: uuid.UUID) -> list[DifyKnowledgeMapping]:
    return list(session.exec(select(DifyKnowledgeMapping).where(DifyKnowledgeMapping.tenant_id == tenant_id)
                             .order_by(DifyKnowledgeMapping.created_at)).all())  # type: ignore[arg-type]


def access_mapping(session: Session, tenant_id: uuid.UUID, ref: str | uuid.UUID) -> DifyKnowledgeMapping:
    """By mapping id or by knowledge id, within ``tenant_id`` only."""
    ref_s = str(ref).strip()
    row: DifyKnowledgeMapping | None = None
    try:
        row = session.get(DifyKnowledgeMapping, uuid.UUID(ref_s))
        if row is not None and row.tenant_id != tenant_id:
            row = None
    except ValueError:
        pass
    if row is None:
        row = session.exec(select(DifyKnowledgeMapping).where(DifyKnowledgeMapping.tenant_id == tenant_id,
                                                              DifyKnowledgeMapping.dify_knowledge_id == ref_s)).first()
    if row is None:
        raise NotFound(f"no mapping for {ref_s!r}")
    return row


def _set_status(session: Session, tenant_id: uuid.UUID, ref: str | uuid.UUID, status: str) -> tuple[DifyKnowledgeMapping, str]:
    row = access_mapping(session, tenant_id, ref)
    before = row.status
    if before != status:
        row.status = status
        row.updated_at = utcnow()
        session.add(row)
        session.flush()
    return row, before


def do_disable_mapping(session: Session, tenant_id: uuid.UUID, ref: str | uuid.UUID) -> tuple[DifyKnowledgeMapping, str]:
    return _set_status(session, tenant_id, ref, "disabled")


def do_enable_mapping(session: Session, tenant_id: uuid.UUID, ref: str | uuid.UUID) -> tuple[DifyKnowledgeMapping, str]:
    return _set_status(session, tenant_id, ref, "active")


def mapping_view(row: DifyKnowledgeMapping) -> dict[str, Any]:
    return {"id": str(row.id), "knowledge_id": row.dify_knowledge_id, "knowledge_base_id": str(row.knowledge_base_id),
            "status": row.status, "tenant_id": str(row.tenant_id),
            "created_by": str(row.created_by) if row.created_by else None,
            "created_at": row.created_at.isoformat() if row.created_at else None,
            "updated_at": row.updated_at.isoformat() if row.updated_at else None}
