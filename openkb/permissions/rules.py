"""The decision table of docs/permissions.md, as pure functions over facts already loaded from PostgreSQL.

Nothing here touches the database: ``loader.py`` fetches every fact a batch of decisions needs in
one statement, and these functions decide in Python. Keeping the rules pure is what lets one
query answer "which of these N documents can this principal read" and lets the same rules
compute the Milvus access fields of a chunk.

The rules (decisions marked DECISION are ours where the product spec is silent; summary in README.md):

* Region. A document's *region* is its nearest ``permission_mode = custom`` ancestor-or-self
  document, or the knowledge base when there is none. Collaborator rows count only on the
  region object: rows on an ``inherit`` document are dormant (DECISION: they wake up if the
  document is switched to custom).
* Role on a document = the principal's best collaborator role (user row or any of the user's
  groups) on the region object, raised to ``manager`` by an owner/manager role on the knowledge
  base or on any *outer* custom ancestor (DECISION: whoever manages a container keeps managing
  what is inside it; viewers/editors of the container do not pass a custom boundary, which is
  how a custom document is made narrower). ``owner`` of a custom document is only its own owner row.
* Visibility on a document = the ``visibility`` of the nearest custom ancestor-or-self that sets
  one, else the knowledge base's. ``visibility`` on an inherit document is ignored.
* Access to a region = a role, OR visibility ``public``, OR visibility ``workspace`` and the user
  is owner/admin/member (not guest) of the workspace. Admin roles (system_admin, tenant_admin,
  workspace admin/owner) give no content by themselves (docs/permissions.md#administrators).
* Gates. Every outer custom ancestor is a gate: the principal needs access to each of their
  regions too (a document under a folder you cannot open is hidden). The knowledge base is not
  a gate, so a custom document can be more open than its knowledge base (docs/permissions.md#the-folder-gate-rule).
* Status. The effective status is the most hidden one on the path (published < draft <
  archived < deleted): a draft folder hides its subtree from readers. Readers without edit see
  only published; editor+ also see drafts and (direct read, not search) archived; deleted
  documents only appear to manager+ in the trash. Search never returns archived/deleted
  documents, documents of an archived knowledge base, or another tenant's documents.
* Tenants. Roles and workspace membership count only inside the principal's tenant; only
  ``public`` content is readable across tenants (by direct read, never by search).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from openkb.models.enums import ROLE_RANK
from openkb.permissions.principal import Principal


class Action(StrEnum):
    """Things a principal may do to a document (docs/permissions.md#capability-matrix plus the read modes)."""

    READ = "read"  # open it directly
    SEARCH = "search"  # get it from search / MCP / Dify / export listings
    TRASH = "trash"  # see and restore it in the trash (deleted only)
    EDIT = "edit"  # edit body, rename
    CREATE_CHILD = "create_child"  # create a document under it
    MOVE = "move"  # move it (the target also needs CREATE_CHILD / KbAction.CREATE)
    DELETE = "delete"
    MANAGE = "manage"  # settings, permission mode, collaborators, invitations
    SHARE = "share"  # create share links
    TRANSFER_OWNER = "transfer_owner"


class KbAction(StrEnum):
    READ = "read"  # open the knowledge base (its home and tree)
    CREATE = "create"  # create documents at its root
    MANAGE = "manage"  # settings, visibility, collaborators
    INVITE = "invite"
    SHARE = "share"
    TRANSFER_OWNER = "transfer_owner"


class WsAction(StrEnum):
    """Things a principal may do to a workspace itself (docs/permissions.md#roles). None of them opens
    content: workspace roles reach documents only through ``visibility = workspace``."""

    READ = "read"  # see it, its name and one's own role (any member, guests too)
    LIST_MEMBERS = "list_members"  # owner/admin/member; a guest only sees what was shared with it
    CREATE_KNOWLEDGE_BASE = "create_knowledge_base"  # owner/admin/member, not guests
    MANAGE = "manage"  # rename, add/change/remove members
    INVITE = "invite"
    TRANSFER_OWNER = "transfer_owner"
    DELETE = "delete"  # remove it (only an empty one, as the revert of its creation)


READ_ACTIONS = frozenset({Action.READ, Action.SEARCH, Action.TRASH})
# a document is *visible* (``access_document`` answers PermissionDenied rather than NotFound)
# when one of these is allowed: a trashed document is seen only by those who may restore it
VISIBLE_ACTIONS = frozenset({Action.READ, Action.TRASH})
ALL_ACTIONS = tuple(Action)
ALL_KB_ACTIONS = tuple(KbAction)
ALL_WS_ACTIONS = tuple(WsAction)

MEMBER_ROLES = frozenset({"owner", "admin", "member"})  # read `visibility = workspace`
WORKSPACE_MANAGERS = frozenset({"owner", "admin"})
# DECISION (docs/permissions.md#roles, "guest: restricted member"): who may create knowledge bases in a
# workspace, and who may see its member list, are the same roles that read `visibility = workspace`
KB_CREATOR_ROLES = MEMBER_ROLES
MEMBER_LIST_ROLES = MEMBER_ROLES
STATUS_SEVERITY = {"published": 0, "draft": 1, "archived": 2, "deleted": 3}
MANAGE_ROLES = frozenset({"owner", "manager"})


def rank(role: str | None) -> int:
    return ROLE_RANK.get(role, 0) if role else 0


def best_role(a: str | None, b: str | None) -> str | None:
    return a if rank(a) >= rank(b) else b


# -- facts --------------------------------------------------------------------------------------


class DocFacts(NamedTuple):
    """One document's permission facts (a tuple: a tree loads thousands, and tuples are built
    several times faster than frozen dataclasses)."""

    id: str
    parent_id: str | None
    kb_id: str
    workspace_id: str
    tenant_id: str
    type: str
    status: str
    mode: str
    visibility: str | None


@dataclass(frozen=True, slots=True)
class KbFacts:
    id: str
    workspace_id: str
    tenant_id: str
    visibility: str
    status: str
    editor_can_delete: bool = False
    editor_can_share: bool = False


@dataclass(frozen=True, slots=True)
class LinkFacts:
    id: str
    tenant_id: str
    object_type: str
    object_id: str
    workspace_id: str | None
    valid: bool  # not revoked, not expired
    require_login: bool
    restrict_to_workspace_members: bool


@dataclass(slots=True)
class Viewer:
    """What PostgreSQL says about the principal, restricted to the objects of one batch."""

    principal: Principal
    user_active: bool = False  # the user exists, is active and belongs to principal.tenant_id
    ws_roles: dict[str, str] = field(default_factory=dict)
    grants: dict[tuple[str, str], str] = field(default_factory=dict)  # best role per object
    link: LinkFacts | None = None
    dify_kbs: frozenset[str] | None = None  # allowed kbs of a live key; None when dead
    # the principal's tenant as PostgreSQL prints ids; computed once, read by nearly every rule
    tenant: str | None = field(init=False, default=None)
    # region_access of each knowledge base's root region, filled as decisions need them (the
    # facts above are fixed for the snapshot's lifetime, so the answer cannot go stale)
    kb_regions: dict[str, RegionAccess] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        t = self.principal.tenant_id
        self.tenant = str(t) if t else None


@dataclass(slots=True)
class Snapshot:
    docs: dict[str, DocFacts]
    kbs: dict[str, KbFacts]
    viewer: Viewer
    # KB form only: (title, sort_order, external_key) per document, in ``docs`` order (tree order)
    display: list[tuple[str, int, str | None]] | None = None
    placements: dict[str, Placement | None] = field(default_factory=dict)


# -- placement (principal-independent) ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Placement:
    doc: DocFacts
    kb: KbFacts
    path: tuple[DocFacts, ...]  # self first, then parent, ..., root document
    customs: tuple[DocFacts, ...]  # custom-mode documents of ``path``, nearest first
    status: str  # effective status

    @property
    def region(self) -> tuple[str, str]:
        if self.customs:
            return ("document", self.customs[0].id)
        return ("knowledge_base", self.kb.id)

    @property
    def visibility(self) -> str:
        return visibility_of(self.customs, self.kb)


def place(snapshot: Snapshot, doc_id: str) -> Placement | None:
    """Locate a document in its tree; None (= deny) if the tree is broken or crosses KBs."""
    if doc_id in snapshot.placements:
        return snapshot.placements[doc_id]
    pl = _place(snapshot, doc_id)
    snapshot.placements[doc_id] = pl
    return pl


def _place(snapshot: Snapshot, doc_id: str) -> Placement | None:
    doc = snapshot.docs.get(doc_id)
    if doc is None:
        return None
    kb = snapshot.kbs.get(doc.kb_id)
    if kb is None or kb.tenant_id != doc.tenant_id:
        return None
    path: list[DocFacts] = []
    seen: set[str] = set()
    node: DocFacts | None = doc
    while node is not None:
        if node.id in seen or node.kb_id != doc.kb_id:
            return None
        seen.add(node.id)
        path.append(node)
        if node.parent_id is None:
            break
        node = snapshot.docs.get(node.parent_id)
        if node is None:
            return None
    customs = tuple(n for n in path if n.mode == "custom")
    status = max((n.status for n in path), key=_severity)
    return Placement(doc=doc, kb=kb, path=tuple(path), customs=customs, status=status)


def _severity(status: str) -> int:
    return STATUS_SEVERITY.get(status, 3)  # an unknown status hides like "deleted"


def visibility_of(customs: tuple[DocFacts, ...], kb: KbFacts) -> str:
    for c in customs:
        if c.visibility:
            return c.visibility
    return kb.visibility


# -- the principal-dependent rules --------------------------------------------------------------


def _same_tenant(viewer: Viewer, tenant_id: str) -> bool:
    # the logged-in person behind a user principal or a share-link visit
    return viewer.principal.user_id is not None and viewer.user_active and viewer.tenant == tenant_id


def _role_in(viewer: Viewer, customs: tuple[DocFacts, ...], kb: KbFacts) -> str | None:
    """Role for the region whose custom chain (nearest first) is ``customs``."""
    if not _same_tenant(viewer, kb.tenant_id):
        return None
    g = viewer.grants
    if not customs:
        return g.get(("knowledge_base", kb.id))
    role = g.get(("document", customs[0].id))
    outers = [("knowledge_base", kb.id)] + [("document", c.id) for c in customs[1:]]
    for obj in outers:
        if g.get(obj) in MANAGE_ROLES:
            role = best_role(role, "manager")
    return role


def _ws_role(viewer: Viewer, kb: KbFacts) -> str | None:
    if not _same_tenant(viewer, kb.tenant_id):
        return None
    return viewer.ws_roles.get(kb.workspace_id)


def _region_open(viewer: Viewer, customs: tuple[DocFacts, ...], kb: KbFacts) -> bool:
    return _role_in(viewer, customs, kb) is not None or _visibility_opens(viewer, customs, kb)


def _visibility_opens(viewer: Viewer, customs: tuple[DocFacts, ...], kb: KbFacts) -> bool:
    vis = visibility_of(customs, kb)
    if vis == "public":
        return True
    return vis == "workspace" and _ws_role(viewer, kb) in MEMBER_ROLES


def _gates_open(viewer: Viewer, customs: tuple[DocFacts, ...], kb: KbFacts) -> bool:
    return all(_region_open(viewer, customs[i:], kb) for i in range(1, len(customs)))


@dataclass(frozen=True, slots=True)
class RegionAccess:
    """The principal-dependent part of a decision, which depends only on the region chain
    (``customs`` + knowledge base): every document of one region shares it, so a whole-tree pass
    computes it once per custom document instead of once per document and action."""

    role: str | None  # _role_in: best role on the region, raised by outer managers
    open: bool  # _region_open: the region itself is open to the principal
    gates_open: bool  # _gates_open: every outer custom region is open too


def region_access(viewer: Viewer, customs: tuple[DocFacts, ...], kb: KbFacts) -> RegionAccess:
    role = _role_in(viewer, customs, kb)
    return RegionAccess(
        role=role,
        open=role is not None or _visibility_opens(viewer, customs, kb),
        gates_open=_gates_open(viewer, customs, kb),
    )


def _region(viewer: Viewer, pl: Placement, ra: RegionAccess | None) -> RegionAccess:
    if ra is not None:
        return ra
    if pl.customs:
        return region_access(viewer, pl.customs, pl.kb)
    # the knowledge base's own region: shared by most documents of a batch, computed once each
    cached = viewer.kb_regions.get(pl.kb.id)
    if cached is None:
        cached = viewer.kb_regions[pl.kb.id] = region_access(viewer, (), pl.kb)
    return cached


def document_role(viewer: Viewer, pl: Placement, ra: RegionAccess | None = None) -> str | None:
    """Effective content role (None when the principal cannot get through the gates)."""
    if viewer.principal.kind != "user" or not viewer.user_active:
        return None
    ra = _region(viewer, pl, ra)
    if not ra.gates_open:
        return None
    return ra.role


def _status_allows(action: Action, pl: Placement, role: str | None, searcher_tenant: str | None) -> bool:
    r = rank(role)
    st = pl.status
    kb_active = pl.kb.status == "active"
    if action is Action.READ:
        return st == "published" or (st in ("draft", "archived") and r >= 2)
    if action is Action.SEARCH:
        if searcher_tenant != pl.doc.tenant_id or not kb_active:
            return False
        return st == "published" or (st == "draft" and r >= 2)
    if action is Action.TRASH:
        return st == "deleted" and r >= 3
    if st == "deleted":
        return False
    if action in (Action.EDIT, Action.CREATE_CHILD, Action.MOVE):
        return kb_active and r >= 2
    if action is Action.DELETE:
        return kb_active and (r >= 3 or (r == 2 and pl.kb.editor_can_delete))
    if action is Action.MANAGE:
        return r >= 3
    if action is Action.SHARE:
        return r >= 3 or (r == 2 and pl.kb.editor_can_share)
    if action is Action.TRANSFER_OWNER:
        return r >= 4
    return False


def _user_allows(viewer: Viewer, pl: Placement, action: Action, ra: RegionAccess | None = None) -> bool:
    p = viewer.principal
    if not viewer.user_active:
        return False
    if action in READ_ACTIONS:
        if not p.has_read_scope():
            return False
    elif not p.has_write_scope():
        return False
    ra = _region(viewer, pl, ra)
    if not ra.gates_open or not ra.open:
        return False
    return _status_allows(action, pl, ra.role, viewer.tenant)


def _public_readable(pl: Placement) -> bool:
    """Anyone on the internet: every region on the path is public."""
    return all(visibility_of(pl.customs[i:], pl.kb) == "public" for i in range(len(pl.customs) or 1))


def _anonymous_allows(viewer: Viewer, pl: Placement, action: Action) -> bool:
    if action not in (Action.READ, Action.SEARCH) or not _public_readable(pl):
        return False
    return _status_allows(action, pl, None, viewer.tenant)


def link_usable(viewer: Viewer) -> bool:
    """The share link is alive and its login/membership conditions still hold."""
    link = viewer.link
    p = viewer.principal
    if link is None or not link.valid or str(p.share_link_id) != link.id or viewer.tenant != link.tenant_id:
        return False
    if link.require_login or link.restrict_to_workspace_members:
        if p.user_id is None or not viewer.user_active:
            return False
    if link.restrict_to_workspace_members:
        return link.workspace_id is not None and link.workspace_id in viewer.ws_roles
    return True


def link_opens(viewer: Viewer, pl: Placement) -> bool:
    """A link opens its object and what inherits from it; a custom sub-document stays closed
    (DECISION: custom mode was chosen to make it narrower than its container)."""
    link = viewer.link
    if link is None or not link_usable(viewer) or pl.doc.tenant_id != link.tenant_id:
        return False
    if link.object_type == "knowledge_base":
        return link.object_id == pl.kb.id and not pl.customs
    for i, node in enumerate(pl.path):
        if node.id == link.object_id:
            return all(n.mode != "custom" for n in pl.path[:i])
    return False


def _link_allows(viewer: Viewer, pl: Placement, action: Action, ra: RegionAccess | None = None) -> bool:
    if action not in (Action.READ, Action.SEARCH):
        return False
    if viewer.principal.user_id is not None and _user_allows(viewer, pl, action, ra):
        return True
    if not link_opens(viewer, pl):
        return False
    return _status_allows(action, pl, None, viewer.tenant)


def _dify_allows(viewer: Viewer, pl: Placement, action: Action) -> bool:
    """DECISION: a key opens the inherited content of its knowledge bases; a custom-mode
    document inside them only if it is public anyway (no key can be a collaborator)."""
    if action not in (Action.READ, Action.SEARCH) or viewer.dify_kbs is None:
        return False
    if pl.kb.id not in viewer.dify_kbs or pl.doc.tenant_id != viewer.tenant:
        return False
    if pl.customs and not _public_readable(pl):
        return False
    return _status_allows(action, pl, None, viewer.tenant)


def allows(viewer: Viewer, pl: Placement | None, action: Action, ra: RegionAccess | None = None) -> bool:
    """``ra``: the ``region_access`` of ``pl``'s region when the caller already has it (the
    whole-tree pass); omitted, it is computed here. Either way the same rules decide."""
    if pl is None:
        return False
    kind = viewer.principal.kind
    if kind == "user":
        return _user_allows(viewer, pl, action, ra)
    if kind == "anonymous":
        return _anonymous_allows(viewer, pl, action)
    if kind == "share_link":
        return _link_allows(viewer, pl, action, ra)
    if kind == "dify_key":
        return _dify_allows(viewer, pl, action)
    if kind == "system":
        return action in READ_ACTIONS
    return False


def capabilities(
    viewer: Viewer, pl: Placement | None, ra: RegionAccess | None = None, actions: tuple[Action, ...] = ALL_ACTIONS
) -> frozenset[Action]:
    return frozenset(a for a in actions if allows(viewer, pl, a, ra))


# -- a whole knowledge base at once ---------------------------------------------------------------


def _walk_tree(snapshot: Snapshot, kb_id: str, with_path: bool = True):
    """Top-down over a snapshot holding *every* document of one knowledge base. Yields
    ``(doc, kb, path, customs, status, region_access)`` for each document ``place`` accepts, with
    exactly the path/customs/status ``place`` would compute, and the region's ``region_access``
    computed once per region (at each custom document). O(n) apart from the depth-bounded path.
    ``with_path=False`` yields ``()`` for the path (building thousands of path tuples is most of
    the walk, and only share-link decisions read it).

    Not yielded (``place`` says None): a document whose parent chain leaves the loaded set (a
    missing parent, or one in another knowledge base, which a snapshot of ``kb_id`` never holds)
    or loops, or whose tenant is not the knowledge base's (ancestors are not tenant-checked, as in
    ``_place``), or any document when the knowledge base is missing."""
    kb = snapshot.kbs.get(kb_id)
    if kb is None:
        return
    children: dict[str | None, list[DocFacts]] = {}
    for d in snapshot.docs.values():
        if d.kb_id == kb_id:
            children.setdefault(d.parent_id, []).append(d)
    viewer = snapshot.viewer
    severity = STATUS_SEVERITY.get
    kb_tenant = kb.tenant_id
    root_ra: RegionAccess | None = None
    # No "seen" set is needed: every document sits in exactly one children list (its parent's)
    # and is pushed only when that parent is popped, so by induction from the roots each is
    # visited at most once, and a parent cycle, having no root, is never entered.
    stack: list[tuple[DocFacts, tuple[DocFacts, ...], tuple[DocFacts, ...], str | None, RegionAccess | None]]
    stack = [(d, (), (), None, None) for d in children.get(None, ())]
    pop, push = stack.pop, stack.append
    while stack:
        d, ppath, pcustoms, pstatus, pra = pop()
        path = (d, *ppath) if with_path else ppath
        if d.mode == "custom":
            customs = (d, *pcustoms)
            ra = region_access(viewer, customs, kb)
        else:
            customs = pcustoms
            if pra is None:
                if root_ra is None:
                    root_ra = region_access(viewer, (), kb)
                pra = root_ra
            ra = pra
        # ``max(path, key=_severity)``: the first most severe status, self first (unknown = 3)
        st = d.status
        status = st if pstatus is None or severity(st, 3) >= severity(pstatus, 3) else pstatus
        if kb_tenant == d.tenant_id:
            yield d, kb, path, customs, status, ra
        kids = children.get(d.id)
        if kids:
            for c in kids:
                push((c, path, customs, status, ra))


def place_tree(snapshot: Snapshot, kb_id: str) -> dict[str, tuple[Placement, RegionAccess] | None]:
    """Every document of ``kb_id`` in the snapshot: ``(place(...), its region_access)``, or None
    where ``place`` gives None."""
    out: dict[str, tuple[Placement, RegionAccess] | None] = {
        d.id: None for d in snapshot.docs.values() if d.kb_id == kb_id
    }
    for d, kb, path, customs, status, ra in _walk_tree(snapshot, kb_id):
        out[d.id] = (Placement(doc=d, kb=kb, path=path, customs=customs, status=status), ra)
    return out


def decide_tree(
    snapshot: Snapshot, kb_id: str, actions: tuple[Action, ...] = ALL_ACTIONS
) -> dict[str, frozenset[Action]]:
    """``capabilities`` (restricted to ``actions``) of every document of ``kb_id`` in the snapshot.

    Except for share links (``link_opens`` looks at the whole path), ``allows`` reads a placement
    only through its region (``customs``, which within one knowledge base the nearest custom id
    determines), its effective ``status``, its knowledge base and its document's ``tenant_id``; so
    documents that agree on those get the same answer and it is computed once per distinct key.
    Keep this in mind when a rule starts reading another field of ``Placement``: apart from share
    links, the placements built here carry an empty ``path`` (see ``_walk_tree``)."""
    out: dict[str, frozenset[Action]] = {}
    viewer = snapshot.viewer
    by_path = viewer.principal.kind == "share_link"
    memo: dict[tuple[str | None, str, str], frozenset[Action]] = {}
    for d, kb, path, customs, status, ra in _walk_tree(snapshot, kb_id, with_path=by_path):
        key = (customs[0].id if customs else None, status, d.tenant_id)
        caps = None if by_path else memo.get(key)
        if caps is None:
            pl = Placement(doc=d, kb=kb, path=path, customs=customs, status=status)
            caps = capabilities(viewer, pl, ra, actions)
            if not by_path:
                memo[key] = caps
        out[d.id] = caps
    nothing: frozenset[Action] = frozenset()
    for d in snapshot.docs.values():  # the documents ``place`` refuses: allowed nothing
        if d.kb_id == kb_id and d.id not in out:
            out[d.id] = nothing
    return out


# -- knowledge-base level -----------------------------------------------------------------------


def kb_role(viewer: Viewer, kb: KbFacts) -> str | None:
    if viewer.principal.kind != "user":
        return None
    return _role_in(viewer, (), kb)


def kb_allows(viewer: Viewer, kb: KbFacts | None, action: KbAction) -> bool:
    if kb is None:
        return False
    p = viewer.principal
    if action is KbAction.READ:
        if p.kind == "system":
            return True
        if p.kind == "dify_key":
            return viewer.dify_kbs is not None and kb.id in viewer.dify_kbs and kb.tenant_id == viewer.tenant
        if p.kind == "share_link":
            link = viewer.link
            if (
                link is not None
                and link_usable(viewer)
                and link.object_type == "knowledge_base"
                and link.object_id == kb.id
            ):
                return True
        if p.kind == "anonymous":
            return kb.visibility == "public"
        if p.user_id is None or not viewer.user_active or not p.has_read_scope():
            return False
        return _region_open(viewer, (), kb)
    if p.kind != "user" or not viewer.user_active or not p.has_write_scope():
        return False
    r = rank(kb_role(viewer, kb))
    if action is KbAction.CREATE:
        return kb.status == "active" and r >= 2
    if action in (KbAction.MANAGE, KbAction.INVITE):
        return r >= 3
    if action is KbAction.SHARE:
        return r >= 3 or (r == 2 and kb.editor_can_share)
    if action is KbAction.TRANSFER_OWNER:
        return r >= 4
    return False


def kb_capabilities(viewer: Viewer, kb: KbFacts | None) -> frozenset[KbAction]:
    return frozenset(a for a in ALL_KB_ACTIONS if kb_allows(viewer, kb, a))


# -- workspace level ----------------------------------------------------------------------------


def ws_role(viewer: Viewer, ws_id: str) -> str | None:
    """owner/admin/member/guest of an active user in its own tenant, else None. (The loader
    reads only membership rows of the principal's tenant.)"""
    if viewer.principal.kind != "user" or not viewer.user_active:
        return None
    return viewer.ws_roles.get(ws_id)


def ws_allows(viewer: Viewer, ws_id: str, action: WsAction) -> bool:
    """Trap: READ and LIST_MEMBERS need no token scope (they show no content); everything else
    is a write and needs ``kb:write``/``doc:write``."""
    role = ws_role(viewer, ws_id)
    if role is None:
        return False
    if action is WsAction.READ:
        return True
    if action is WsAction.LIST_MEMBERS:
        return role in MEMBER_LIST_ROLES
    if not viewer.principal.has_write_scope():
        return False
    if action is WsAction.CREATE_KNOWLEDGE_BASE:
        return role in KB_CREATOR_ROLES
    if action in (WsAction.MANAGE, WsAction.INVITE):
        return role in WORKSPACE_MANAGERS
    if action in (WsAction.TRANSFER_OWNER, WsAction.DELETE):
        return role == "owner"
    return False


def ws_capabilities(viewer: Viewer, ws_id: str) -> frozenset[WsAction]:
    return frozenset(a for a in ALL_WS_ACTIONS if ws_allows(viewer, ws_id, a))


# -- the change log ------------------------------------------------------------------------------


def change_visible(viewer: Viewer, tenant_id: str, actor_id: str | None, kb: KbFacts | None) -> bool:
    """May the principal see (and so revert) a change row of ``tenant_id`` made by ``actor_id``
    inside knowledge base ``kb`` (None: a workspace-level change, or the knowledge base is gone)?
    docs/api.md#runs-and-the-change-log: one's own changes; all of a knowledge base one manages.
    Only active users of the row's tenant see anything (a token of any scope sees its user's own
    changes; seeing the others' needs ``KbAction.MANAGE``, hence a write scope)."""
    p = viewer.principal
    if p.kind != "user" or p.user_id is None or not viewer.user_active or viewer.tenant != tenant_id:
        return False
    if actor_id is not None and actor_id == str(p.user_id):
        return True
    return kb is not None and kb.tenant_id == tenant_id and kb_allows(viewer, kb, KbAction.MANAGE)
