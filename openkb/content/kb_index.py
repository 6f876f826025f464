"""A knowledge base's index status for its managers, and retrying the pages that failed.

Counts only: the settings page shows how many pages are pending / indexed / failed, never which
ones, because a manager of the knowledge base need not see every page in it (custom permission
mode, docs/permissions.md#permission-mode). Retrying puts every failed page back to ``pending``
with its attempt counter reset and queues its index job after commit (the worker then behaves
as after a save; docs/operations.md#index-operations). Models and Milvus are not reachable from
here: that is the operator's (docs/retrieval.md#principles).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text
from sqlmodel import Session

from openkb.audit import record_audit
from openkb.jobs import enqueue_after_commit
from openkb.models.enums import INDEX_STATUSES
from openkb.permissions.access import access_knowledge_base
from openkb.permissions.principal import Principal
from openkb.permissions.rules import KbAction

# at most this many pages are re-queued per retry (a second click continues)
RETRY_BATCH = 1000

_LIVE_PAGES = "knowledge_base_id = :kb AND type = 'page' AND status <> 'deleted' AND deleted_at IS NULL"


def kb_index_status(session: Session, principal: Principal, kb_id: uuid.UUID) -> dict[str, Any]:
    """``{"pending": n, "indexed": n, "failed": n}`` over the live pages (managers only)."""
    acc = access_knowledge_base(session, principal, kb_id, KbAction.MANAGE)
    rows = session.execute(
        text(f"SELECT index_status, count(*) FROM documents WHERE {_LIVE_PAGES} GROUP BY index_status"),
        {"kb": acc.knowledge_base.id},
    ).all()
    counts = dict.fromkeys(INDEX_STATUSES, 0)
    counts.update({s: int(n) for s, n in rows})
    return counts


def retry_failed(session: Session, principal: Principal, kb_id: uuid.UUID) -> int:
    """Re-queue the failed pages of the knowledge base; returns how many (audited when > 0)."""
    acc = access_knowledge_base(session, principal, kb_id, KbAction.MANAGE)
    ids = [
        r[0]
        for r in session.execute(
            text(
                f"UPDATE documents SET index_status = 'pending', index_attempts = 0, index_error = NULL "
                f"WHERE id IN (SELECT id FROM documents WHERE {_LIVE_PAGES} AND index_status = 'failed' "
                f"LIMIT :n FOR UPDATE) RETURNING id"
            ),
            {"kb": acc.knowledge_base.id, "n": RETRY_BATCH},
        ).all()
    ]
    for doc_id in ids:
        enqueue_after_commit(session, "index_document", document_id=str(doc_id))
    if ids:
        record_audit(
            session,
            tenant_id=principal.tenant_id,
            actor=principal,
            action="knowledge_base.index_retried",
            object_type="knowledge_base",
            object_id=acc.knowledge_base.id,
            metadata={"documents": len(ids)},
        )
    return len(ids)


__all__ = ["RETRY_BATCH", "kb_index_status", "retry_failed"]
