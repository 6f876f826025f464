"""What an installation reaches: its switched-on collection grants, by location.

The user's own permissions are *not* decided here: every object is first fetched through the
``access_*`` functions (or filtered by ``filter_readable_documents``) with the user's principal,
then this module asks the second question — is the object's *place* inside a collection the
app was granted? The answer is the intersection docs/apps.md#reach describes.

Roots of reach, per action (``read`` or ``write``):

* the builtin ``diary`` / ``keep`` knowledge base — ``collections.<action>:diary|keep``;
* each collection the user selected for this installation — ``collections.<action>:user-selected``;
* each collection the installation created — ``collections.create`` (readable and writable by
  its creator, with everything below it).

A grant on a collection covers every sub-collection, present and future, because the check is
by ancestry at the moment of the call: content moved into a granted collection becomes
reachable, moved out it is not. Trap: the ancestry comes from ``locate`` (one recursive
statement for any number of documents), never from a cached path.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PGUUID
from sqlmodel import Session

from openkb.apps.registry import AppCaller
from openkb.errors import KnowledgePermissionMissing


def missing(permission: str) -> KnowledgePermissionMissing:
    """The single-object failure of docs/apps.md#two-failure-modes."""
    return KnowledgePermissionMissing(f"lacks knowledge permission {permission}", permission=permission)


def require(caller: AppCaller, permission: str) -> None:
    if not caller.has(permission):
        raise missing(permission)


@dataclass(frozen=True, slots=True)
class Loc:
    """Where a document (page or folder) is now."""

    id: uuid.UUID
    knowledge_base_id: uuid.UUID
    type: str
    status: str
    external_key: str | None
    writer: uuid.UUID | None  # the installation that created it (None: a person or another path)
    ancestors: tuple[uuid.UUID, ...]  # parent first

    @property
    def chain(self) -> tuple[uuid.UUID, ...]:
        """Itself and its ancestors: the folders a grant on any of them covers."""
        return (self.id, *self.ancestors)

    def collection(self) -> tuple[uuid.UUID, uuid.UUID | None]:
        """The collection it sits directly in: its parent folder, or the knowledge base."""
        return self.knowledge_base_id, (self.ancestors[0] if self.ancestors else None)


_LOCATE = """
WITH RECURSIVE up(doc_id, anc_id, depth) AS (
    SELECT d.id, d.parent_id, 1 FROM documents d WHERE {where} AND d.parent_id IS NOT NULL
    UNION ALL
    SELECT up.doc_id, p.parent_id, up.depth + 1 FROM up JOIN documents p ON p.id = up.anc_id
    WHERE p.parent_id IS NOT NULL AND up.depth < 64
)
SELECT d.id, d.knowledge_base_id, d.type, d.status, d.external_key, a.installation_id AS writer,
       ARRAY(SELECT up.anc_id FROM up WHERE up.doc_id = d.id ORDER BY up.depth) AS ups
FROM documents d LEFT JOIN app_documents a ON a.document_id = d.id
WHERE {where}
"""
_BY_IDS = text(_LOCATE.format(where="d.id = ANY(:ids)")).bindparams(bindparam("ids", type_=ARRAY(PGUUID(as_uuid=True))))
_BY_KEY = text(_LOCATE.format(where="d.knowledge_base_id = :kb AND d.external_key = :key"))


def _loc(r: object) -> Loc:
    ancestors = tuple(r.ups or ())  # type: ignore[attr-defined]  # parent first (depth 1 = the parent)
    return Loc(r.id, r.knowledge_base_id, r.type, r.status, r.external_key, r.writer, ancestors)  # type: ignore[attr-defined]


def locate(session: Session, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Loc]:
    ids = list(dict.fromkeys(ids))
    if not ids:
        return {}
    return {r.id: _loc(r) for r in session.execute(_BY_IDS, {"ids": ids})}


def locate_key(session: Session, kb_id: uuid.UUID, key: str) -> Loc | None:
    r = session.execute(_BY_KEY, {"kb": kb_id, "key": key}).first()
    return _loc(r) if r is not None else None


Root = tuple[uuid.UUID, uuid.UUID | None, str]


def roots(caller: AppCaller, action: str) -> list[Root]:
    """Every root of reach for ``action`` with the string that opens it (granted or not); the
    app's own collections first, so a refusal names the most specific string."""
    out: list[Root] = [(kb, doc, "collections.create") for kb, doc in caller.created]
    out += [(kb, doc, f"collections.{action}:user-selected") for kb, doc in caller.selected]
    if caller.diary_kb_id is not None:
        out.append((caller.diary_kb_id, None, f"collections.{action}:diary"))
    if caller.keep_kb_id is not None:
        out.append((caller.keep_kb_id, None, f"collections.{action}:keep"))
    return out


def _opening(caller: AppCaller, action: str, kb_id: uuid.UUID, chain: Sequence[uuid.UUID]) -> list[str]:
    return [p for rk, rd, p in roots(caller, action) if rk == kb_id and (rd is None or rd in chain)]


def reaches(caller: AppCaller, action: str, kb_id: uuid.UUID, chain: Sequence[uuid.UUID]) -> bool:
    """Whether a place (knowledge base + folder chain, innermost first) is inside a granted root."""
    return any(p in caller.grants for p in _opening(caller, action, kb_id, chain))


def check(caller: AppCaller, action: str, kb_id: uuid.UUID, chain: Sequence[uuid.UUID]) -> None:
    """``reaches`` or the refusal naming the string that would open it."""
    opening = _opening(caller, action, kb_id, chain)
    if not any(p in caller.grants for p in opening):
        raise missing(opening[0] if opening else f"collections.{action}:user-selected")


def builtin_of(caller: AppCaller, kb_id: uuid.UUID, folder_id: uuid.UUID | None) -> str | None:
    if folder_id is None and kb_id == caller.diary_kb_id:
        return "diary"
    if folder_id is None and kb_id == caller.keep_kb_id:
        return "keep"
    return None
