"""Recent documents of a user: the pages they saved most recently, still readable to them.

The home page of the web app lists them (``GET /api/me/recent-documents``). "Recent" is the
caller's own saves (document versions they created, docs/data-model.md), not views: OpenKB
records no reads.

Trap: access changes after a save (a document moved under a custom-permission folder, a role
removed, the document trashed) must hide it, so the candidates are re-checked with the same
read rule as every other listing (``filter_documents``), after the SQL picked them. The SQL
over-fetches (3x) so a few hidden ones don't shorten the list; many hidden ones can.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text
from sqlmodel import Session

from openkb.errors import Unauthenticated
from openkb.permissions import Action, Principal
from openkb.permissions.service import filter_documents

MAX_LIMIT = 100

_RECENT = text("""
    SELECT d.id, d.knowledge_base_id, d.title, d.type, kb.title AS knowledge_base_title,
           max(v.created_at) AS edited_at
      FROM document_versions v
      JOIN documents d ON d.id = v.document_id
      JOIN knowledge_bases kb ON kb.id = d.knowledge_base_id
     WHERE v.created_by = :user_id AND v.tenant_id = :tenant_id
       AND d.deleted_at IS NULL AND kb.status = 'active'
  GROUP BY d.id, d.knowledge_base_id, d.title, d.type, kb.title
  ORDER BY edited_at DESC, d.id
     LIMIT :n
""")


def recent_documents(session: Session, principal: Principal, *, limit: int = 20) -> list[dict[str, Any]]:
    """Newest first; at most ``limit`` (1-100)."""
    if not principal.is_user or principal.user_id is None or principal.tenant_id is None:
        raise Unauthenticated("sign in to list your recent documents")
    limit = max(1, min(limit, MAX_LIMIT))
    rows = session.execute(
        _RECENT, {"user_id": principal.user_id, "tenant_id": principal.tenant_id, "n": limit * 3}
    ).all()
    readable = filter_documents(session, principal, [r.id for r in rows], Action.READ)
    out = [
        {
            "id": r.id,
            "knowledge_base_id": r.knowledge_base_id,
            "knowledge_base_title": r.knowledge_base_title,
            "title": r.title,
            "type": r.type,
            "edited_at": r.edited_at,
        }
        for r in rows
        if uuid.UUID(str(r.id)) in readable
    ]
    return out[:limit]
