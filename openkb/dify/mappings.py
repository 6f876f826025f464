"""``dify_knowledge_mappings``: the "External Knowledge ID" a Dify user types -> a knowledge base.

The id Dify sends is an arbitrary string chosen in Dify's UI, so it is never trusted as a
knowledge base id: it is looked up here (per tenant; another tenant's mapping is invisible)
*before* the key's ``allowed_knowledge_base_ids`` is checked. Mapping a knowledge id grants
nothing by itself; only a key's allow-list does, so a mapping may name any knowledge base of the
tenant by id, while a slug or title names only one the administrator can read (no private
knowledge base's existence is revealed by its name, docs/dify.md#knowledge-mapping).

``do_map`` is an upsert: mapping an existing knowledge id again points it at the new knowledge
base and re-activates it. Changes take the acting principal, check it administers the tenant
(``keys.authorize_tenant``) and write their own ``dify.mapping.*`` audit row with before/after.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, select

from openkb.audit import record_audit
from openkb.dify.keys import authorize_tenant, resolve_kb
from openkb.errors import NotFound, ValidationError
from openkb.models import DifyKnowledgeMapping
from openkb.models._base import utcnow
from openkb.permissions.principal import Principal

MAX_KNOWLEDGE_ID = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def normalize_knowledge_id(value: str) -> str:
    """Dify sends the id verbatim; surrounding whitespace is a paste accident, not part of it."""
    v = (value or "").strip()
    if not v:
        raise ValidationError("knowledge id must not be empty", field="knowledge_id")
    if len(v) > MAX_KNOWLEDGE_ID or _CONTROL.search(v):
        raise ValidationError(
            f"knowledge id must be at most {MAX_KNOWLEDGE_ID} printable characters", field="knowledge_id"
        )
    return v


@dataclass(frozen=True)
class MapResult:
    row: DifyKnowledgeMapping
    created: bool
    before: dict[str, Any] | None


def _audit(session: Session, principal: Principal, row: DifyKnowledgeMapping, action: str, **meta: Any) -> None:
    record_audit(
        session,
        tenant_id=row.tenant_id,
        actor=principal,
        action=f"dify.mapping.{action}",
        object_type="dify_knowledge_mapping",
        object_id=row.id,
        metadata={"knowledge_id": row.dify_knowledge_id, **meta},
    )


def do_map(
    session: Session, principal: Principal, *, tenant_id: uuid.UUID, knowledge_id: str, kb: str | uuid.UUID
) -> MapResult:
    authorize_tenant(session, principal, tenant_id)
    kid = normalize_knowledge_id(knowledge_id)
    target = resolve_kb(session, tenant_id, str(kb), principal)
    row = session.exec(
        select(DifyKnowledgeMapping)
        .where(DifyKnowledgeMapping.tenant_id == tenant_id, DifyKnowledgeMapping.dify_knowledge_id == kid)
        .with_for_update()
    ).first()
    if row is None:
        row = DifyKnowledgeMapping(
            tenant_id=tenant_id,
            dify_knowledge_id=kid,
            knowledge_base_id=target.id,
            status="active",
            created_by=principal.user_id,
        )
        session.add(row)
        session.flush()
        _audit(session, principal, row, "create", knowledge_base_id=str(target.id), before=None)
        return MapResult(row, True, None)
    before = {"knowledge_base_id": str(row.knowledge_base_id), "status": row.status}
    row.knowledge_base_id = target.id
    row.status = "active"
    row.updated_at = utcnow()
    session.add(row)
    session.flush()
    _audit(session, principal, row, "update", knowledge_base_id=str(target.id), before=before)
    return MapResult(row, False, before)


def list_mappings(session: Session, tenant_id: uuid.UUID) -> list[DifyKnowledgeMapping]:
    return list(
        session.exec(
            select(DifyKnowledgeMapping)
            .where(DifyKnowledgeMapping.tenant_id == tenant_id)
            .order_by(DifyKnowledgeMapping.created_at)
        ).all()
    )  # type: ignore[arg-type]


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
        row = session.exec(
            select(DifyKnowledgeMapping).where(
                DifyKnowledgeMapping.tenant_id == tenant_id, DifyKnowledgeMapping.dify_knowledge_id == ref_s
            )
        ).first()
    if row is None:
        raise NotFound(f"no mapping for {ref_s!r}")
    return row


def _set_status(
    session: Session, principal: Principal, tenant_id: uuid.UUID, ref: str | uuid.UUID, status: str
) -> tuple[DifyKnowledgeMapping, str]:
    authorize_tenant(session, principal, tenant_id)
    row = access_mapping(session, tenant_id, ref)
    before = row.status
    if before != status:
        row.status = status
        row.updated_at = utcnow()
        session.add(row)
        session.flush()
        _audit(
            session, principal, row, "disable" if status == "disabled" else "enable", before=before, after=row.status
        )
    return row, before


def do_disable_mapping(
    session: Session, principal: Principal, tenant_id: uuid.UUID, ref: str | uuid.UUID
) -> tuple[DifyKnowledgeMapping, str]:
    return _set_status(session, principal, tenant_id, ref, "disabled")


def do_enable_mapping(
    session: Session, principal: Principal, tenant_id: uuid.UUID, ref: str | uuid.UUID
) -> tuple[DifyKnowledgeMapping, str]:
    return _set_status(session, principal, tenant_id, ref, "active")


def mapping_view(row: DifyKnowledgeMapping) -> dict[str, Any]:
    return {
        "id": str(row.id),
        "knowledge_id": row.dify_knowledge_id,
        "knowledge_base_id": str(row.knowledge_base_id),
        "status": row.status,
        "tenant_id": str(row.tenant_id),
        "created_by": str(row.created_by) if row.created_by else None,
        "created_at": row.created_at.isoformat() if row.created_at else None,
        "updated_at": row.updated_at.isoformat() if row.updated_at else None,
    }
