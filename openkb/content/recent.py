"""The home page's lists of documents: a user's recent documents (the pages they saved most
recently) and the documents shared with them, each still readable to them.

``GET /api/me/recent-documents``: "recent" is the caller's own saves (document versions they
created, docs/data-model.md), not views: OpenKB records no reads.

``GET /api/me/shared-documents``: pages and folders on which the caller, or a group they belong
to, is a collaborator of the document itself, granted by someone else (a custom document: rows
left on one switched back to inherit are dormant, docs/permissions.md#permission-mode). Why: someone
invited to one document outside their workspaces had no way back to it but the link; knowledge
bases shared with them are on the home page already (``GET /api/knowledge-bases``). The home
page shows the latest 100 at most; ``shared_documents_page`` pages through all of them with an
exact count, for MCP's ``kb_list_shared_documents`` (docs/mcp.md#pagination).

Trap: access changes after a save (a document moved under a custom-permission folder, a role
removed, the document trashed) must hide it. The statement applies the read rule itself
(``openkb.permissions.sql``: the same decision as ``filter_documents``, proven equal on random
worlds), so ``LIMIT`` counts readable documents only: no over-fetch, and no short list when many
of the user's saves became unreadable.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, TEXT, UUID
from sqlmodel import Session

from openkb.errors import Unauthenticated, ValidationError
from openkb.models.enums import ROLE_RANK
from openkb.permissions import KbAction, Principal, knowledge_base_capabilities
from openkb.permissions.sql import READABLE_BINDS, READABLE_CTES, readable_params

MAX_LIMIT = 100
MAX_PAGE = 1000  # one page of a paged listing (shared_documents_page)
MAX_OFFSET = 2_147_483_647  # past any real list; keeps a crafted offset inside PostgreSQL's bigint

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


_SHARED_LISTED = f"""
WITH RECURSIVE grants AS (
    SELECT c.object_id AS id, c.role, c.created_at, c.created_by
      FROM collaborators c
     WHERE c.object_type = 'document' AND c.tenant_id = :tenant_id
       AND c.created_by IS DISTINCT FROM :user_id  -- added by oneself: not shared with one
       AND ((c.subject_type = 'user' AND c.subject_id = :user_id)
         OR (c.subject_type = 'group' AND c.subject_id IN (
                SELECT gm.group_id FROM group_members gm WHERE gm.user_id = :user_id AND gm.tenant_id = :tenant_id)))
),
shared AS (  -- one row per document: the newest grant says when and by whom, the strongest its role
    SELECT DISTINCT ON (g.id) g.id, g.created_at AS shared_at, g.created_by,
           (SELECT g2.role FROM grants g2 WHERE g2.id = g.id
             ORDER BY array_position(:roles_best_first, g2.role) LIMIT 1) AS role
      FROM grants g
  ORDER BY g.id, g.created_at DESC
),
rp_candidates AS (SELECT id FROM shared),
{READABLE_CTES},
listed AS (
    SELECT d.id, d.knowledge_base_id, d.title, d.type, kb.title AS knowledge_base_title, s.shared_at, s.role,
           u.id AS shared_by_id, u.display_name AS shared_by_name
      FROM shared s
      JOIN rp_readable r ON r.id = s.id
      JOIN documents d ON d.id = s.id
      JOIN knowledge_bases kb ON kb.id = d.knowledge_base_id
 LEFT JOIN users u ON u.id = s.created_by
     WHERE d.deleted_at IS NULL AND kb.status = 'active'
       AND d.permission_mode = 'custom'  -- rows left on an inherit document are dormant
)
"""
_SHARED_BINDS = (
    bindparam("user_id", type_=UUID(as_uuid=False)),
    bindparam("tenant_id", type_=UUID(as_uuid=False)),
    bindparam("roles_best_first", value=sorted(ROLE_RANK, key=ROLE_RANK.__getitem__, reverse=True), type_=ARRAY(TEXT)),
    *READABLE_BINDS,
)
_SHARED = text(_SHARED_LISTED + "SELECT * FROM listed ORDER BY shared_at DESC, id LIMIT :n").bindparams(*_SHARED_BINDS)
# One page and the exact count in one statement: the count comes from a one-row subquery, so a
# page past the end still says how many there are (its only row has NULL document columns).
_SHARED_PAGE = text(
    _SHARED_LISTED
    + """SELECT c.total, p.*
      FROM (SELECT count(*) AS total FROM listed) c
 LEFT JOIN LATERAL (SELECT * FROM listed ORDER BY shared_at DESC, id LIMIT :n OFFSET :o) p ON true
  ORDER BY p.shared_at DESC, p.id"""
).bindparams(*_SHARED_BINDS)


def _readable_rows(
    session: Session, principal: Principal, statement: Any, limit: int, what: str, cap: int = MAX_LIMIT, **extra: Any
) -> list[Any]:
    """Run one of the statements above for a signed-in user: ``limit`` clamped to 1-``cap``, the
    read rule's binds added."""
    if not principal.is_user or principal.user_id is None or principal.tenant_id is None:
        raise Unauthenticated(f"sign in to list {what}")
    params = {"user_id": str(principal.user_id), "tenant_id": str(principal.tenant_id), **extra}
    return list(
        session.execute(statement, {**params, "n": max(1, min(limit, cap)), **readable_params(principal)}).all()
    )


def _readable_kbs(session: Session, principal: Principal, rows: list[Any]) -> set[str]:
    """The knowledge bases of ``rows`` the caller may open, as ids in text. A page readable on its
    own (a custom page shared from a private knowledge base) does not open its knowledge base,
    whose title is then not the caller's to learn: that knowledge base answers 404 to them
    (docs/permissions.md#outsiders-get-404), so the lists give ``knowledge_base_title`` null."""
    kb_ids = {str(r.knowledge_base_id) for r in rows if r.knowledge_base_id is not None}
    if not kb_ids:
        return set()
    caps = knowledge_base_capabilities(session, principal, kb_ids)
    return {str(k) for k, acts in caps.items() if KbAction.READ in acts}


def _doc(r: Any, readable_kbs: set[str]) -> dict[str, Any]:
    return {
        "id": r.id,
        "knowledge_base_id": r.knowledge_base_id,
        "knowledge_base_title": r.knowledge_base_title if str(r.knowledge_base_id) in readable_kbs else None,
        "title": r.title,
        "type": r.type,
    }


def recent_documents(session: Session, principal: Principal, *, limit: int = 20) -> list[dict[str, Any]]:
    """Newest first; at most ``limit`` (1-100)."""
    rows = _readable_rows(session, principal, _RECENT, limit, "your recent documents")
    kbs = _readable_kbs(session, principal, rows)
    return [{**_doc(r, kbs), "edited_at": r.edited_at} for r in rows]


def shared_documents(session: Session, principal: Principal, *, limit: int = 20) -> list[dict[str, Any]]:
    """Documents shared with the caller (or a group of theirs) as a collaborator, newest share
    first, each with the strongest role granted and who granted the newest one; at most ``limit``
    (1-100). The read rule is applied in the statement, as for recent documents: a document the
    caller can no longer read (trashed, behind a closed folder) is left out."""
    rows = _readable_rows(session, principal, _SHARED, limit, "the documents shared with you")
    kbs = _readable_kbs(session, principal, rows)
    return [_shared(r, kbs) for r in rows]


def shared_documents_page(
    session: Session, principal: Principal, *, offset: int = 0, limit: int = 20
) -> tuple[list[dict[str, Any]], int]:
    """``shared_documents`` one page at a time, with the exact number of them: the first list is
    the home page's latest 100, but a client that pages (MCP, docs/mcp.md#pagination) must reach
    every one. ``limit`` is clamped to 1-``MAX_PAGE``."""
    if offset < 0 or offset > MAX_OFFSET:
        raise ValidationError(f"offset must be between 0 and {MAX_OFFSET}", field="offset")
    rows = _readable_rows(session, principal, _SHARED_PAGE, limit, "the documents shared with you", MAX_PAGE, o=offset)
    total = int(rows[0].total) if rows else 0
    rows = [r for r in rows if r.id is not None]
    kbs = _readable_kbs(session, principal, rows)
    return [_shared(r, kbs) for r in rows], total


def _shared(r: Any, readable_kbs: set[str]) -> dict[str, Any]:
    return {
        **_doc(r, readable_kbs),
        "role": r.role,
        "shared_at": r.shared_at,
        "shared_by": {"id": r.shared_by_id, "display_name": r.shared_by_name} if r.shared_by_id else None,
    }
