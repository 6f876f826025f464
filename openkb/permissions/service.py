"""The permission service (docs/permissions.md#the-permission-service): the one decision point for every reader.

Every function takes an explicit ``Principal`` and answers from PostgreSQL in one statement
(``loader.py``), batch forms included. Web, search, MCP, Dify, asset reads and export all call
these; nothing may re-derive access on its own.

Naming (zulip style): ``can_*`` answer a question and never raise; ``access_*`` (``access.py``)
fetch, check and raise ``NotFound`` when the caller may not see the object (same error as "does
not exist") or ``PermissionDenied`` when they may see it but not do this.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import NamedTuple

from sqlmodel import Session

from openkb.errors import ValidationError
from openkb.models import Document, KnowledgeBase, Workspace
from openkb.permissions import rules
from openkb.permissions.loader import load_kb_snapshot, load_snapshot
from openkb.permissions.principal import Principal
from openkb.permissions.rules import Action, KbAction, WsAction

IdLike = uuid.UUID | str


class ObjectRef(NamedTuple):
    object_type: str  # "workspace" | "knowledge_base" | "document"
    object_id: uuid.UUID


def as_ref(obj: ObjectRef | tuple[str, IdLike] | Workspace | KnowledgeBase | Document) -> ObjectRef:
    if isinstance(obj, Workspace):
        return ObjectRef("workspace", obj.id)
    if isinstance(obj, KnowledgeBase):
        return ObjectRef("knowledge_base", obj.id)
    if isinstance(obj, Document):
        return ObjectRef("document", obj.id)
    otype, oid = obj
    if otype not in ("workspace", "knowledge_base", "document"):
        raise ValidationError(f"unknown object type {otype!r}")
    return ObjectRef(otype, oid if isinstance(oid, uuid.UUID) else uuid.UUID(str(oid)))


def _id(x: IdLike | Document | KnowledgeBase) -> str:
    return str(x.id) if isinstance(x, (Document, KnowledgeBase, Workspace)) else str(x)


# -- documents ----------------------------------------------------------------------------------


def document_capabilities(
    session: Session, principal: Principal, doc_ids: Iterable[IdLike]
) -> dict[uuid.UUID, frozenset[Action]]:
    """Every allowed action per document, for a whole list, in one query (UI buttons, oracle)."""
    ids = list(dict.fromkeys(str(d) for d in doc_ids))
    snap = load_snapshot(session, principal, doc_ids=ids)
    return {uuid.UUID(d): rules.capabilities(snap.viewer, rules.place(snap, d)) for d in ids}


def document_roles(session: Session, principal: Principal, doc_ids: Iterable[IdLike]) -> dict[uuid.UUID, str | None]:
    """Effective content role per document (None: no role, or blocked by a custom ancestor)."""
    ids = list(dict.fromkeys(str(d) for d in doc_ids))
    snap = load_snapshot(session, principal, doc_ids=ids)
    out: dict[uuid.UUID, str | None] = {}
    for d in ids:
        pl = rules.place(snap, d)
        out[uuid.UUID(d)] = None if pl is None else rules.document_role(snap.viewer, pl)
    return out


def filter_documents(
    session: Session, principal: Principal, doc_ids: Iterable[IdLike], action: Action | str = Action.READ
) -> set[uuid.UUID]:
    """The subset of ``doc_ids`` on which ``action`` is allowed; one query for any N."""
    act = Action(action)
    given = {str(d): d if isinstance(d, uuid.UUID) else uuid.UUID(str(d)) for d in doc_ids}
    if not given:
        return set()
    snap = load_snapshot(session, principal, doc_ids=list(given))
    return {u for d, u in given.items() if rules.allows(snap.viewer, rules.place(snap, d), act)}


def filter_readable_documents(
    session: Session, principal: Principal, doc_ids: Iterable[IdLike], *, for_search: bool = False
) -> set[uuid.UUID]:
    """Which of these documents may be shown. ``for_search=True`` is the final check of search,
    MCP, Dify and export: it also drops archived documents, archived knowledge bases and other
    tenants' public documents."""
    return filter_documents(session, principal, doc_ids, Action.SEARCH if for_search else Action.READ)


class TreeAccess:
    """One knowledge base, decided whole: what the principal may do to the knowledge base
    (``kb_actions``), and per document of it (deleted ones included) the allowed actions among
    those asked for. A document not in it (created since the decision) is allowed nothing."""

    __slots__ = ("kb_actions", "_caps", "rows")

    def __init__(
        self,
        kb_actions: frozenset[KbAction],
        caps: dict[str, frozenset[Action]],
        rows: list[tuple[rules.DocFacts, tuple[str, int, str | None]]] | None = None,
    ) -> None:
        self.kb_actions = kb_actions
        self._caps = caps  # keyed by str(id): no uuid parsing for the thousands of ids of a tree
        # every document of the knowledge base in tree order (siblings by sort_order, age, id),
        # deleted ones included, with (title, sort_order, external_key): loaded by the same
        # statement as the facts, so a listing needs no second query and cannot disagree with them
        self.rows = rows or []

    def ids_allowing(self, action: Action | str = Action.READ) -> set[str]:
        """The allowed documents' ids as PostgreSQL prints them (no uuid objects: a tree has thousands)."""
        act = Action(action)
        return {d for d, caps in self._caps.items() if act in caps}

    def capabilities(self, doc_id: IdLike) -> frozenset[Action]:
        return self._caps.get(str(doc_id), frozenset())

    def allows(self, doc_id: IdLike, action: Action | str = Action.READ) -> bool:
        return Action(action) in self._caps.get(str(doc_id), ())

    def allowed(self, action: Action | str = Action.READ) -> set[uuid.UUID]:
        return {uuid.UUID(d) for d in self.ids_allowing(action)}

    @property
    def documents(self) -> dict[uuid.UUID, frozenset[Action]]:
        return {uuid.UUID(d): caps for d, caps in self._caps.items()}


def tree_access(
    session: Session, principal: Principal, kb_id: IdLike, actions: Iterable[Action | str] = rules.ALL_ACTIONS
) -> TreeAccess:
    """The knowledge-base-scoped fast path of ``document_capabilities`` / ``filter_documents``:
    every document of ``kb_id`` in one statement (no ancestor walk), decided top-down with the
    same rules, the region part once per custom document. Same answers for every document of
    the knowledge base (tests/permissions/test_tree_fast_path.py proves it on random worlds);
    a document not in the result (created since) is simply not allowed."""
    acts = tuple(dict.fromkeys(Action(a) for a in actions))
    kid = str(uuid.UUID(str(kb_id)))  # canonical form, as PostgreSQL prints ids
    snap = load_kb_snapshot(session, principal, kid)
    rows = list(zip(snap.docs.values(), snap.display or ()))
    return TreeAccess(rules.kb_capabilities(snap.viewer, snap.kbs.get(kid)), rules.decide_tree(snap, kid, acts), rows)


def readable_tree(session: Session, principal: Principal, kb_id: IdLike) -> set[uuid.UUID]:
    """The documents of ``kb_id`` that ``filter_readable_documents`` would keep (direct read)."""
    return tree_access(session, principal, kb_id, (Action.READ,)).allowed(Action.READ)


def can(session: Session, principal: Principal, action: Action | str, document: IdLike | Document) -> bool:
    return bool(filter_documents(session, principal, [_id(document)], action))


def can_read_document(session: Session, principal: Principal, document: IdLike | Document) -> bool:
    return can(session, principal, Action.READ, document)


def can_edit_document(session: Session, principal: Principal, document: IdLike | Document) -> bool:
    return can(session, principal, Action.EDIT, document)


def can_manage_document(session: Session, principal: Principal, document: IdLike | Document) -> bool:
    return can(session, principal, Action.MANAGE, document)


def can_delete_document(session: Session, principal: Principal, document: IdLike | Document) -> bool:
    return can(session, principal, Action.DELETE, document)


def can_move_document(
    session: Session,
    principal: Principal,
    document: IdLike | Document,
    *,
    new_parent_id: IdLike | None,
    knowledge_base_id: IdLike | None = None,
) -> bool:
    """Move needs MOVE on the document and the right to create at the target. Access after the
    move is simply what the new place says (access follows location)."""
    did = _id(document)
    target = None if new_parent_id is None else str(new_parent_id)
    if target == did:
        return False
    snap = load_snapshot(
        session,
        principal,
        doc_ids=[did] + ([target] if target else []),
        kb_ids=[str(knowledge_base_id)] if knowledge_base_id else [],
    )
    pl = rules.place(snap, did)
    if not rules.allows(snap.viewer, pl, Action.MOVE):
        return False
    if target is not None:
        tpl = rules.place(snap, target)
        if tpl is None or any(n.id == did for n in tpl.path):  # no moving under itself
            return False
        if knowledge_base_id is not None and tpl.kb.id != str(knowledge_base_id):
            return False
        return rules.allows(snap.viewer, tpl, Action.CREATE_CHILD)
    kb_id = str(knowledge_base_id) if knowledge_base_id else (pl.kb.id if pl else None)
    return rules.kb_allows(snap.viewer, snap.kbs.get(kb_id or ""), KbAction.CREATE)


def can_create_document(
    session: Session, principal: Principal, knowledge_base_id: IdLike, *, parent_id: IdLike | None = None
) -> bool:
    if parent_id is None:
        return can_in_knowledge_base(session, principal, KbAction.CREATE, knowledge_base_id)
    snap = load_snapshot(session, principal, doc_ids=[str(parent_id)])
    pl = rules.place(snap, str(parent_id))
    return pl is not None and pl.kb.id == str(knowledge_base_id) and rules.allows(snap.viewer, pl, Action.CREATE_CHILD)


# -- knowledge bases and workspaces -------------------------------------------------------------


def knowledge_base_capabilities(
    session: Session, principal: Principal, kb_ids: Iterable[IdLike]
) -> dict[uuid.UUID, frozenset[KbAction]]:
    ids = list(dict.fromkeys(str(k) for k in kb_ids))
    snap = load_snapshot(session, principal, kb_ids=ids)
    return {uuid.UUID(k): rules.kb_capabilities(snap.viewer, snap.kbs.get(k)) for k in ids}


def can_in_knowledge_base(
    session: Session, principal: Principal, action: KbAction | str, kb: IdLike | KnowledgeBase
) -> bool:
    kid = _id(kb)
    snap = load_snapshot(session, principal, kb_ids=[kid])
    return rules.kb_allows(snap.viewer, snap.kbs.get(kid), KbAction(action))


def can_read_knowledge_base(session: Session, principal: Principal, kb: IdLike | KnowledgeBase) -> bool:
    return can_in_knowledge_base(session, principal, KbAction.READ, kb)


def can_manage_knowledge_base(session: Session, principal: Principal, kb: IdLike | KnowledgeBase) -> bool:
    return can_in_knowledge_base(session, principal, KbAction.MANAGE, kb)


def resolve_workspace_role(session: Session, principal: Principal, workspace_id: IdLike | Workspace) -> str | None:
    """owner/admin/member/guest, or None. Never implies content access by itself."""
    wid = _id(workspace_id)
    return rules.ws_role(load_snapshot(session, principal, ws_ids=[wid]).viewer, wid)


def can_in_workspace(
    session: Session, principal: Principal, action: WsAction | str, workspace_id: IdLike | Workspace
) -> bool:
    wid = _id(workspace_id)
    return rules.ws_allows(load_snapshot(session, principal, ws_ids=[wid]).viewer, wid, WsAction(action))


def can_manage_workspace(session: Session, principal: Principal, workspace_id: IdLike | Workspace) -> bool:
    return can_in_workspace(session, principal, WsAction.MANAGE, workspace_id)


def resolve_effective_role(
    session: Session, principal: Principal, obj: ObjectRef | tuple[str, IdLike] | KnowledgeBase | Document
) -> str | None:
    """Content role owner/manager/editor/viewer on a knowledge base or document, or None."""
    ref = as_ref(obj)
    oid = str(ref.object_id)
    if ref.object_type == "knowledge_base":
        snap = load_snapshot(session, principal, kb_ids=[oid])
        kb = snap.kbs.get(oid)
        return None if kb is None else rules.kb_role(snap.viewer, kb)
    if ref.object_type == "document":
        snap = load_snapshot(session, principal, doc_ids=[oid])
        pl = rules.place(snap, oid)
        return None if pl is None else rules.document_role(snap.viewer, pl)
    raise ValidationError("workspaces have workspace roles: use resolve_workspace_role")


def can_invite_collaborator(
    session: Session, principal: Principal, obj: ObjectRef | tuple[str, IdLike] | Workspace | KnowledgeBase | Document
) -> bool:
    """Workspace: owner/admin. Knowledge base / document: manager or owner."""
    ref = as_ref(obj)
    if ref.object_type == "workspace":
        return can_manage_workspace(session, principal, ref.object_id)
    if ref.object_type == "knowledge_base":
        return can_in_knowledge_base(session, principal, KbAction.INVITE, ref.object_id)
    return can(session, principal, Action.MANAGE, ref.object_id)


def can_create_share_link(
    session: Session, principal: Principal, obj: ObjectRef | tuple[str, IdLike] | KnowledgeBase | Document
) -> bool:
    """owner/manager; editor only where the knowledge base enables ``editor_can_create_share_links``."""
    ref = as_ref(obj)
    if ref.object_type == "knowledge_base":
        return can_in_knowledge_base(session, principal, KbAction.SHARE, ref.object_id)
    if ref.object_type == "document":
        return can(session, principal, Action.SHARE, ref.object_id)
    return False
