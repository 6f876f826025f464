"""Recent documents of a user: the pages they saved most recently, still readable to them.

The home page of the web app lists them (``GET /api/me/recent-documents``). "Recent" is the
caller's own saves (document versions they created, docs/data-model.md), not views: OpenKB
records no reads.

Trap: access changes after a save (a document moved under a custom-permission folder, a role
removed, the document trashed) must hide it. The statement applies the read rule itself
(``openkb.permissions.sql``: the same decision as ``filter_documents``, proven equal on random
worlds), so ``LIMIT`` counts readable documents only: no over-fetch, and no short list when many
of the user's saves became unreadable.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import UUID
from sqlmodel import Session

from openkb.errors import Unauthenticated
from openkb.permissions import Principal
from openkb.permissions.sql import READABLE_BINDS, READABLE_CTES, readable_params

MAX_LIMIT = 100

_RECENT = text(f"""
WITH RECURSIVE mine AS (
    SELECT v.document_id AS id, max(v.created_at) AS edited_at
      FROM document_versions v
     WHERE v.created_by = :user_id AND v.tenant_id = :tenant_id
  GROUP BY v.document_id
),
rp_candidates AS (SELECT id FROM mine),
{READABLE_CTES}
    SELECT d.id, d.knowledge_base_id, d.title, d.type, kb.title AS knowledge_base_title, m.edited_at
      FROM mine m
      JOIN rp_readable r ON r.id = m.id
      JOIN documents d ON d.id = m.id
      JOIN knowledge_bases kb ON kb.id = d.knowledge_base_id
     WHERE d.deleted_at IS NULL AND kb.status = 'active'
  ORDER BY m.edited_at DESC, d.id
     LIMIT :n
""").bindparams(
    bindparam("user_id", type_=UUID(as_uuid=False)), bindparam("tenant_id", type_=UUID(as_uuid=False)), *READABLE_BINDS
)


def recent_documents(session: Session, principal: Principal, *, limit: int = 20) -> list[dict[str, Any]]:
    """Newest first; at most ``limit`` (1-100)."""
    if not principal.is_user or principal.user_id is None or principal.tenant_id is None:
        raise Unauthenticated("sign in to list your recent documents")
    limit = max(1, min(limit, MAX_LIMIT))
    params = {"user_id": str(principal.user_id), "tenant_id": str(principal.tenant_id), "n": limit}
    rows = session.execute(_RECENT, {**params, **readable_params(principal)}).all()
    return [
        {
            "id": r.id,
            "knowledge_base_id": r.knowledge_base_id,
            "knowledge_base_title": r.knowledge_base_title,
            "title": r.title,
            "type": r.type,
            "edited_at": r.edited_at,
        }
        for r in rows
    ]
