"""The document tree of a knowledge base: what a caller sees, and the structural rules of moves.

Folders are ``documents.type = 'folder'``; pages may have children too (Yuque nests pages).
Depth counts levels (a root document has depth 1) and is capped by ``max_folder_depth``.

Visibility is decided by the permission service only: the tree and the trash ask its
knowledge-base fast path (``access_tree``: the whole knowledge base in one statement, decided
top-down by the same rules as ``filter_readable_documents``). The tree's rows come from that very
statement; the trash loads its rows first, so a document trashed in between is simply left
out. An item whose parent
the caller cannot see (a custom document more open than its folder) is hung under its nearest
visible ancestor, or the root, so the tree never names a hidden folder.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Integer, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlmodel import Session

from openkb.config import Settings
from openkb.content import limits
from openkb.errors import DocumentInTrash, InvalidMove, NotFound, PermissionDenied
from openkb.models import Document
from openkb.permissions import (
    Action,
    DocumentAccess,
    Principal,
    access_document,
    access_tree,
    filter_readable_documents,
)

_ANCESTORS = text(
    """
WITH RECURSIVE up AS (
    SELECT id, parent_id, title, type, knowledge_base_id, 0 AS lvl FROM documents WHERE id = :id
    UNION ALL
    SELECT d.id, d.parent_id, d.title, d.type, d.knowledge_base_id, up.lvl + 1
    FROM documents d JOIN up ON d.id = up.parent_id WHERE up.lvl < 10000
)
SELECT id, parent_id, title, type, knowledge_base_id, lvl FROM up ORDER BY lvl
"""
).bindparams(bindparam("id", type_=UUID(as_uuid=True)))

_SUBTREE = text(
    """
WITH RECURSIVE down AS (
    SELECT id, 0 AS lvl FROM documents WHERE id = :id
    UNION ALL
    SELECT d.id, down.lvl + 1 FROM documents d JOIN down ON d.parent_id = down.id
    WHERE d.knowledge_base_id = :kb AND down.lvl < 10000
)
SELECT id, lvl FROM down
"""
).bindparams(bindparam("id", type_=UUID(as_uuid=True)), bindparam("kb", type_=UUID(as_uuid=True)))

_TRASH = text(
    """
SELECT id, parent_id, type, title, status, sort_order, permission_mode, deleted_at, updated_by
FROM documents WHERE knowledge_base_id = :kb AND status = 'deleted'
ORDER BY deleted_at DESC NULLS LAST, id
"""
).bindparams(bindparam("kb", type_=UUID(as_uuid=True)))

_SIBLINGS = text(
    """
SELECT id FROM documents
WHERE knowledge_base_id = :kb AND parent_id IS NOT DISTINCT FROM :parent AND id <> :moved AND status <> 'deleted'
ORDER BY sort_order, created_at, id
"""
).bindparams(
    bindparam("kb", type_=UUID(as_uuid=True)),
    bindparam("parent", type_=UUID(as_uuid=True)),
    bindparam("moved", type_=UUID(as_uuid=True)),
)

_RENUMBER = text(
    """
UPDATE documents d SET sort_order = v.ord
FROM unnest(:ids, :ords) AS v(id, ord)
WHERE d.id = v.id AND d.sort_order <> v.ord
"""
).bindparams(bindparam("ids", type_=ARRAY(UUID(as_uuid=True))), bindparam("ords", type_=ARRAY(Integer)))

_NEXT_ORDER = text(
    """
SELECT coalesce(max(sort_order) + 1, 0) FROM documents
WHERE knowledge_base_id = :kb AND parent_id IS NOT DISTINCT FROM :parent
"""
).bindparams(bindparam("kb", type_=UUID(as_uuid=True)), bindparam("parent", type_=UUID(as_uuid=True)))


def ancestors(session: Session, doc_id: uuid.UUID) -> list[dict[str, Any]]:
    """Self first, then parent, ..., the root document (empty if the id does not exist)."""
    return [dict(r) for r in session.execute(_ANCESTORS, {"id": doc_id}).mappings()]


_IN_TRASH = text("SELECT id FROM documents WHERE id = ANY(:ids) AND status = 'deleted'").bindparams(
    bindparam("ids", type_=ARRAY(UUID(as_uuid=True)))
)


def in_trash(session: Session, ids: list[uuid.UUID]) -> set[uuid.UUID]:
    """Which of ``ids`` are themselves in the trash (one statement): asked of a document's
    ancestors, since trashing marks only the trashed document, not its subtree."""
    return set(session.execute(_IN_TRASH, {"ids": list(ids)}).scalars()) if ids else set()


def depth_of(session: Session, doc_id: uuid.UUID | None) -> int:
    """Levels from the root down to ``doc_id`` inclusive; 0 for the knowledge-base root."""
    if doc_id is None:
        return 0
    return len(ancestors(session, doc_id))


def subtree(session: Session, doc_id: uuid.UUID, kb_id: uuid.UUID) -> list[tuple[uuid.UUID, int]]:
    """(id, level below ``doc_id``) for the document and all its descendants."""
    return [(r[0], r[1]) for r in session.execute(_SUBTREE, {"id": doc_id, "kb": kb_id})]


def lock_tree(session: Session, kb_id: uuid.UUID) -> None:
    """Serialize structural changes (create/move) within one knowledge base.

    Without it two concurrent moves (A under B, B under A) each pass the cycle check against the
    other's old state and together make a cycle.
    """
    session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 7))"), {"k": f"tree:{kb_id}"})


def next_sort_order(session: Session, kb_id: uuid.UUID, parent_id: uuid.UUID | None) -> int:
    return int(session.execute(_NEXT_ORDER, {"kb": kb_id, "parent": parent_id}).scalar_one())


def already_beside(
    session: Session, kb_id: uuid.UUID, parent_id: uuid.UUID | None, doc_id: uuid.UUID, beside: tuple[uuid.UUID, bool]
) -> bool:
    """Whether ``doc_id`` already sits just before (or after) the sibling ``beside`` names under
    ``parent_id``: a drop on its own place is then no move (no renumbering, no change recorded)."""
    everyone = uuid.UUID(int=0)  # no document's id: the list keeps ``doc_id`` itself
    ids = [r[0] for r in session.execute(_SIBLINGS, {"kb": kb_id, "parent": parent_id, "moved": everyone})]
    if doc_id not in ids or beside[0] not in ids:
        return False
    return ids.index(beside[0]) - ids.index(doc_id) == (-1 if beside[1] else 1)


def place_at(
    session: Session,
    kb_id: uuid.UUID,
    parent_id: uuid.UUID | None,
    doc_id: uuid.UUID,
    position: int | None,
    *,
    beside: tuple[uuid.UUID, bool] | None = None,
) -> int:
    """Put ``doc_id`` at ``position`` (0-based, clamped; None = last) among the live children of
    ``parent_id`` and renumber them 0..n-1. Returns the document's new sort_order.

    ``beside`` = (sibling id, after?) places it just before or after that sibling instead: what
    a reader who does not see every sibling can ask for (a position counts the siblings hidden
    from them too, docs/api.md#moving-and-reordering). Found here, under the tree's lock, so a
    concurrent move cannot shift it; a sibling that left meanwhile puts the document last."""
    ids = [r[0] for r in session.execute(_SIBLINGS, {"kb": kb_id, "parent": parent_id, "moved": doc_id})]
    if beside is not None:
        anchor, after = beside
        position = ids.index(anchor) + int(after) if anchor in ids else None
    pos = len(ids) if position is None else max(0, min(int(position), len(ids)))
    ids.insert(pos, doc_id)
    session.execute(_RENUMBER, {"ids": ids, "ords": list(range(len(ids)))})
    _expire(session, set(ids) - {doc_id})
    return pos


def _expire(session: Session, ids: set[uuid.UUID]) -> None:
    """Raw UPDATEs bypass the identity map: drop stale sort_order of loaded siblings."""
    from openkb.models import Document

    for obj in list(session.identity_map.values()):
        if isinstance(obj, Document) and obj.id in ids:
            session.expire(obj, ["sort_order"])


def check_move(
    session: Session,
    doc_id: uuid.UUID,
    kb_id: uuid.UUID,
    new_parent_id: uuid.UUID | None,
    settings: Settings | None = None,
) -> None:
    """Structural checks of a move (the caller has checked that it may see both ends).

    Raises ``InvalidMove`` for a move under itself or a descendant, or into another knowledge
    base, and ``FolderDepthExceeded`` when the moved subtree would end up too deep.
    """
    if new_parent_id is None:
        target_depth = 0
    else:
        chain = ancestors(session, new_parent_id)
        if not chain:
            raise NotFound("parent document not found")
        if chain[0]["knowledge_base_id"] != kb_id:
            raise InvalidMove("a document can only move within its knowledge base", field="parent_id")
        if any(r["id"] == doc_id for r in chain):
            raise InvalidMove("a document cannot move under itself or one of its descendants", field="parent_id")
        target_depth = len(chain)
    height = max(lvl for _, lvl in subtree(session, doc_id, kb_id)) + 1
    limits.check_depth(target_depth + height, settings)


def target_parent(
    session: Session, principal: Principal, kb_id: uuid.UUID, parent_id: uuid.UUID | None
) -> DocumentAccess | None:
    """The target parent must exist in ``kb_id`` and be readable, else 404; one in the trash is
    ``DOCUMENT_IN_TRASH`` for those who see it there (who may restore it), 404 for others. Its
    access (None for the knowledge-base root) answers the create-child question without another
    query."""
    if parent_id is None:
        return None
    try:
        acc = access_document(session, principal, parent_id, Action.READ)
    except PermissionDenied:
        # denied, not hidden: the caller may restore it (access_document), so it may be named
        parent = session.get(Document, parent_id)
        if parent is not None and (parent.status == "deleted" or parent.deleted_at is not None):
            raise DocumentInTrash(
                f"the parent {parent.title!r} is in the trash; restore it first", field="parent_id"
            ) from None
        raise
    if acc.document.knowledge_base_id != kb_id:
        raise InvalidMove("the parent belongs to another knowledge base", field="parent_id")
    return acc


def get_tree(session: Session, principal: Principal, kb_id: uuid.UUID) -> list[dict[str, Any]]:
    """The visible documents of a knowledge base in tree order, ids as canonical strings.

    One statement (the permission service's knowledge-base snapshot carries the listing columns)
    and no uuid objects: a 5,000-document tree is built in a few milliseconds of Python."""
    access = access_tree(session, principal, kb_id, (Action.READ,))
    visible = access.ids_allowing(Action.READ)
    if not visible:
        return []
    parent_of = {d.id: d.parent_id for d, _ in access.rows}
    items = []
    append = items.append
    for d, (title, sort_order, key) in access.rows:
        if d.id not in visible:
            continue
        p = d.parent_id
        if p is not None and p not in visible:
            hops = 0
            while p is not None and p not in visible and hops < 10000:
                p = parent_of.get(p)
                hops += 1
            if p not in visible:
                p = None
        append(
            {
                "id": d.id,
                "parent_id": p,
                "type": d.type,
                "title": title,
                "status": d.status,
                "sort_order": sort_order,
                "permission_mode": d.mode,
                "visibility": d.visibility,
                "external_key": key,
            }
        )
    return items


def list_trash(session: Session, principal: Principal, kb_id: uuid.UUID) -> list[dict[str, Any]]:
    """Trashed documents (the roots of deleted subtrees) the caller may restore or purge."""
    rows = [dict(r) for r in session.execute(_TRASH, {"kb": kb_id}).mappings()]
    access = access_tree(session, principal, kb_id, (Action.TRASH,))
    if not rows:
        return []
    return [r for r in rows if access.allows(r["id"], Action.TRASH)]


def get_subtree(session: Session, principal: Principal, doc_id: uuid.UUID) -> list[dict[str, Any]]:
    """The visible part of one document's subtree, the document itself first with ``parent_id``
    null (its real parent is outside what the caller was given); hidden levels are skipped."""
    chain = ancestors(session, doc_id)
    if not chain:
        raise NotFound("document not found")
    ids = [n for n, _ in subtree(session, doc_id, chain[0]["knowledge_base_id"])]
    visible = filter_readable_documents(session, principal, ids)
    if doc_id not in visible:
        raise NotFound("document not found")
    rows = [
        dict(r)
        for r in session.execute(
            text(
                "SELECT id, parent_id, type, title, status, sort_order, permission_mode, visibility, external_key "
                "FROM documents WHERE id = ANY(:ids) AND status <> 'deleted' ORDER BY sort_order, created_at, id"
            ),
            {"ids": ids},
        ).mappings()
    ]
    parent_of = {r["id"]: r["parent_id"] for r in rows}
    items = []
    for r in rows:
        if r["id"] not in visible:
            continue
        if r["id"] == doc_id:
            r["parent_id"] = None
        else:
            p = r["parent_id"]
            while p is not None and p != doc_id and p not in visible:
                p = parent_of.get(p)
            r["parent_id"] = p if p is not None else doc_id
        items.append(r)
    items.sort(key=lambda r: r["id"] != doc_id)
    return items
