"""``access_*``: fetch an object for an action, or raise. The only fetch-then-authorize in OpenKB.

Every adapter and service that acts on one workspace, knowledge base or document by id calls
one of these (``tests/permissions/test_access_guard.py`` fails on a hand-written copy in
``openkb/content`` or ``server/``). The contract (docs/permissions.md):

* ``NotFound`` — the object does not exist **or** the caller may not see it: the two are the same
  error with the same message, so ids cannot be probed;
* ``PermissionDenied`` — the caller sees the object but may not do ``action``;
* otherwise the ORM row, with the caller's role and every allowed action, so a service that needs
  more than one answer (buttons, a field-by-field update) asks no second question.

Each decision is one statement (``loader.load_snapshot``) plus the primary-key fetch (which the
session's identity map answers without a query when the row is already loaded). The decision
comes first and the fetch second: a caller that may not see the object never loads its row.
Trap: ``for_update=True`` fetches with ``SELECT ... FOR UPDATE`` (the row a trash or a purge is
about to write), ``for_update="no key"`` with ``FOR NO KEY UPDATE`` (a save: see
``access_document``), so the lock is held from the access on; ``populate_existing`` then
refreshes an already-loaded row instead of trusting the identity map.

``check_*`` are the decisions alone (no fetch) for services that need only ids and the tenant
(``guards.authorize``); ``access_tree`` is the knowledge-base-wide form of the tree and trash.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlmodel import Session, col, select

from openkb.errors import NotFound, PermissionDenied
from openkb.models import Document, KnowledgeBase, Workspace
from openkb.permissions import rules
from openkb.permissions.loader import load_snapshot
from openkb.permissions.principal import Principal
from openkb.permissions.rules import Action, KbAction, KbFacts, Placement, Snapshot, WsAction
from openkb.permissions.service import IdLike, TreeAccess, tree_access

WS_NOT_FOUND = "workspace not found"
KB_NOT_FOUND = "knowledge base not found"
DOC_NOT_FOUND = "document not found"

# what a refusal says, where "not allowed to <action> this workspace" would be unclear
_WS_DENIED = {
    WsAction.LIST_MEMBERS: "guests cannot list the workspace's members",
    WsAction.CREATE_KNOWLEDGE_BASE: "only workspace owners, admins and members can create knowledge bases",
    WsAction.MANAGE: "only the workspace owner or an admin can change it",
    WsAction.INVITE: "only the workspace owner or an admin can invite to it",
    WsAction.TRANSFER_OWNER: "only the workspace owner can transfer it",
    WsAction.DELETE: "only the workspace owner can remove it",
}


def _uuid(x: IdLike) -> uuid.UUID:
    return x if isinstance(x, uuid.UUID) else uuid.UUID(str(x))


def _denied(noun: str, missing: Iterable[Any], message: str | None) -> PermissionDenied:
    if message is None:
        message = f"not allowed to {', '.join(sorted(str(a.value) for a in missing))} this {noun}"
    return PermissionDenied(message)


# -- decisions ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkspaceDecision:
    id: uuid.UUID
    tenant_id: uuid.UUID
    role: str
    actions: frozenset[WsAction]


@dataclass(frozen=True, slots=True)
class KnowledgeBaseDecision:
    facts: KbFacts
    role: str | None
    actions: frozenset[KbAction]


@dataclass(frozen=True, slots=True)
class DocumentDecision:
    snapshot: Snapshot
    placement: Placement
    role: str | None
    actions: frozenset[Action]


def check_workspace(
    session: Session, principal: Principal, workspace_id: IdLike, action: WsAction | str | None = WsAction.READ
) -> WorkspaceDecision:
    """Visible = the caller has a workspace role (guests included); ``action=None``: visible only."""
    wid = str(_uuid(workspace_id))
    snap = load_snapshot(session, principal, ws_ids=[wid])
    role = rules.ws_role(snap.viewer, wid)
    if role is None:
        raise NotFound(WS_NOT_FOUND)
    caps = rules.ws_capabilities(snap.viewer, wid)
    if action is not None and WsAction(action) not in caps:
        act = WsAction(action)
        raise _denied("workspace", [act], _WS_DENIED.get(act))
    # the role row is of the principal's tenant (the loader reads no other), so is the workspace
    return WorkspaceDecision(uuid.UUID(wid), _uuid(principal.tenant_id), role, caps)  # type: ignore[arg-type]


def check_knowledge_base(
    session: Session, principal: Principal, kb_id: IdLike, action: KbAction | str | None = KbAction.READ
) -> KnowledgeBaseDecision:
    """Visible = ``KbAction.READ``; ``action=None``: visible only."""
    kid = str(_uuid(kb_id))
    snap = load_snapshot(session, principal, kb_ids=[kid])
    kb = snap.kbs.get(kid)
    caps = rules.kb_capabilities(snap.viewer, kb)
    if kb is None or KbAction.READ not in caps:
        raise NotFound(KB_NOT_FOUND)
    if action is not None and KbAction(action) not in caps:
        raise _denied("knowledge base", [KbAction(action)], None)
    return KnowledgeBaseDecision(kb, rules.kb_role(snap.viewer, kb), caps)


def check_document(
    session: Session, principal: Principal, document_id: IdLike, action: Action | str | None = Action.READ
) -> DocumentDecision:
    """Visible = ``Action.READ`` or ``Action.TRASH`` (``rules.VISIBLE_ACTIONS``); ``action=None``:
    visible only (the caller checks the status first, then ``require``s, e.g. restore from trash)."""
    did = str(_uuid(document_id))
    snap = load_snapshot(session, principal, doc_ids=[did])
    pl = rules.place(snap, did)
    caps = rules.capabilities(snap.viewer, pl)
    if pl is None or not caps & rules.VISIBLE_ACTIONS:
        raise NotFound(DOC_NOT_FOUND)
    if action is not None and Action(action) not in caps:
        raise _denied("document", [Action(action)], None)
    return DocumentDecision(snap, pl, rules.document_role(snap.viewer, pl), caps)


# -- fetch + decide ------------------------------------------------------------------------------


Lock = bool | Literal["no key"]


def _fetch(session: Session, model: Any, oid: uuid.UUID, for_update: Lock) -> Any:
    if not for_update:
        return session.get(model, oid)
    return session.exec(
        select(model)
        .where(col(model.id) == oid)
        .with_for_update(key_share=for_update == "no key")
        .execution_options(populate_existing=True)
    ).first()


@dataclass(frozen=True, slots=True)
class WorkspaceAccess:
    workspace: Workspace
    role: str  # owner/admin/member/guest
    actions: frozenset[WsAction]

    def require(self, *actions: WsAction, message: str | None = None) -> None:
        """PermissionDenied unless every one of ``actions`` is allowed."""
        missing = [a for a in actions if a not in self.actions]
        if missing:
            raise _denied("workspace", missing, message or (_WS_DENIED.get(missing[0]) if len(missing) == 1 else None))


@dataclass(frozen=True, slots=True)
class KnowledgeBaseAccess:
    knowledge_base: KnowledgeBase
    role: str | None  # content role (owner/manager/editor/viewer) or None
    actions: frozenset[KbAction]

    def require(self, *actions: KbAction, message: str | None = None) -> None:
        missing = [a for a in actions if a not in self.actions]
        if missing:
            raise _denied("knowledge base", missing, message)


@dataclass(frozen=True, slots=True)
class DocumentAccess:
    document: Document
    role: str | None  # effective content role or None
    actions: frozenset[Action]
    _decision: DocumentDecision = field(repr=False)

    def require(self, *actions: Action, message: str | None = None) -> None:
        """PermissionDenied unless every one of ``actions`` is allowed (one message naming all)."""
        missing = [a for a in actions if a not in self.actions]
        if missing:
            raise _denied("document", missing, message)

    def require_any(self, *actions: Action, message: str | None = None) -> None:
        if not any(a in self.actions for a in actions):
            raise _denied("document", actions, message)

    @property
    def knowledge_base_active(self) -> bool:
        """False in an archived knowledge base, which is read-only (docs/permissions.md#status):
        what ``actions`` allows there is reading, including seeing its trash."""
        return self._decision.placement.kb.status == "active"

    def readable_ancestors(self) -> list[uuid.UUID]:
        """Ancestors the caller may read, root first, decided from the snapshot the access was
        decided on (the loader fetched the whole chain): the breadcrumb costs no query."""
        d = self._decision
        out = []
        for node in reversed(d.placement.path[1:]):
            if rules.allows(d.snapshot.viewer, rules.place(d.snapshot, node.id), Action.READ):
                out.append(uuid.UUID(node.id))
        return out


def access_workspace(
    session: Session,
    principal: Principal,
    workspace_id: IdLike,
    action: WsAction | str | None = WsAction.READ,
    *,
    for_update: bool = False,
) -> WorkspaceAccess:
    """The workspace for ``action`` (default: any member may see it). NotFound for non-members."""
    d = check_workspace(session, principal, workspace_id, action)
    ws = _fetch(session, Workspace, d.id, for_update)
    if ws is None or ws.tenant_id != d.tenant_id:  # removed between the two statements
        raise NotFound(WS_NOT_FOUND)
    return WorkspaceAccess(ws, d.role, d.actions)


def access_knowledge_base(
    session: Session,
    principal: Principal,
    kb_id: IdLike,
    action: KbAction | str | None = KbAction.READ,
    *,
    for_update: bool = False,
) -> KnowledgeBaseAccess:
    d = check_knowledge_base(session, principal, kb_id, action)
    kb = _fetch(session, KnowledgeBase, uuid.UUID(d.facts.id), for_update)
    if kb is None:
        raise NotFound(KB_NOT_FOUND)
    return KnowledgeBaseAccess(kb, d.role, d.actions)


def access_document(
    session: Session,
    principal: Principal,
    document_id: IdLike,
    action: Action | str | None = Action.READ,
    *,
    for_update: Lock = False,
) -> DocumentAccess:
    """The document for ``action``. A trashed document is visible to those who may restore it
    (``Action.TRASH``), so they get PermissionDenied, not NotFound, for anything else.
    ``for_update="no key"`` locks ``FOR NO KEY UPDATE``: for a write that updates the row but
    neither deletes it nor changes its id (a save), so it does not wait for transactions that
    only reference the row (an index job holds ``FOR KEY SHARE`` from inserting its chunks until
    it commits, seconds for a long page)."""
    d = check_document(session, principal, document_id, action)
    doc = _fetch(session, Document, uuid.UUID(d.placement.doc.id), for_update)
    if doc is None:
        raise NotFound(DOC_NOT_FOUND)
    return DocumentAccess(doc, d.role, d.actions, d)


def access_subtree(
    session: Session, principal: Principal, document_id: IdLike, actions: Iterable[Action | str] = rules.ALL_ACTIONS
) -> tuple[DocumentAccess, TreeAccess]:
    """A document the caller may read and the decisions over its knowledge base's tree, for work
    on the document's subtree (export). Unlike ``access_tree`` the knowledge base itself need not
    be readable: a custom page can be more open than its knowledge base
    (docs/permissions.md#the-folder-gate-rule). Callers keep to the subtree and read each
    document's own decision in the ``TreeAccess``."""
    doc = access_document(session, principal, document_id, Action.READ)
    return doc, tree_access(session, principal, doc.document.knowledge_base_id, actions)


def access_tree(
    session: Session, principal: Principal, kb_id: IdLike, actions: Iterable[Action | str] = rules.ALL_ACTIONS
) -> TreeAccess:
    """``tree_access`` of a knowledge base the caller may open (``KbAction.READ``), else
    NotFound: one statement for the knowledge base, its documents and the decisions."""
    acc = tree_access(session, principal, kb_id, actions)
    if KbAction.READ not in acc.kb_actions:
        raise NotFound(KB_NOT_FOUND)
    return acc
