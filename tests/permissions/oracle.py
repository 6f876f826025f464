"""A deliberately naive reference implementation of docs/permissions.md, written from the spec's tables.

It knows nothing of the service: it reads the plain ``World`` and walks each document's path
one question at a time. Rules (docs/permissions.md plus the decisions documented in
``openkb/permissions/rules.py``):

- people act only if active and a member of the tenant they act in;
- content roles come from collaborator rows (user or one of the user's same-tenant groups) on
  the nearest custom ancestor-or-self of a document, or on the KB if there is none; owners and
  managers of the KB or of an outer custom ancestor are managers inside it;
- visibility: nearest custom ancestor-or-self with a visibility, else the KB's;
- a person may open a document if they may open it and every custom ancestor-or-self:
  role, or public, or workspace + being owner/admin/member of the workspace;
- the most hidden status on the path counts; the §8 matrix for actions.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.permissions.worlds import WDoc, World

RANK = {"viewer": 1, "editor": 2, "manager": 3, "owner": 4}
HIDDEN = ["published", "draft", "archived", "deleted"]
READ_SCOPES = {"kb:read", "kb:search", "doc:read"}
WRITE_SCOPES = {"kb:write", "doc:write"}
DOC_ACTIONS = ["read", "search", "trash", "edit", "create_child", "move", "delete", "manage", "share", "transfer_owner"]
KB_ACTIONS = ["read", "create", "manage", "invite", "share", "transfer_owner"]
WS_ACTIONS = ["read", "list_members", "create_knowledge_base", "manage", "invite", "transfer_owner", "delete"]


@dataclass(frozen=True)
class Who:
    """A principal, in world terms."""

    kind: str  # user | anonymous | share_link | dify_key | system
    tenant: str | None = None  # "A" | "B" | None
    user: int | None = None
    link: int | None = None
    dify: int | None = None
    scopes: frozenset[str] | None = None

    def __str__(self) -> str:
        bits = [self.kind, f"tenant={self.tenant}"]
        if self.user is not None:
            bits.append(f"u{self.user}")
        if self.link is not None:
            bits.append(f"l{self.link}")
        if self.dify is not None:
            bits.append(f"f{self.dify}")
        if self.scopes is not None:
            bits.append(f"scopes={sorted(self.scopes)}")
        return " ".join(bits)


def _memo(fn):
    """Cache per oracle instance (answers are pure functions of the world); logic unchanged."""
    name = f"_memo_{fn.__name__}"

    def wrapper(self, *args):
        cache = self.__dict__.setdefault(name, {})
        if args not in cache:
            cache[args] = fn(self, *args)
        return cache[args]

    return wrapper


class Oracle:
    def __init__(self, world: World) -> None:
        self.w = world

    # -- people --------------------------------------------------------------------------------

    @_memo
    def person_ok(self, who: Who) -> bool:
        if who.user is None:
            return False
        u = self.w.user(who.user)
        return u.status == "active" and u.tenant == who.tenant and u.tenant_role is not None

    @_memo
    def roles_on(self, who: Who, otype: str, n: int) -> list[str]:
        if not self.person_ok(who) or self.w.object_tenant(otype, n) != who.tenant:
            return []
        found = []
        for g in self.w.grants:
            if g.object_type != otype or g.object_n != n:
                continue
            if g.subject_type == "user" and g.subject_n == who.user:
                found.append(g.role)
            if g.subject_type == "group":
                grp = self.w.group(g.subject_n)
                if grp.tenant == who.tenant and who.user in grp.members:
                    found.append(g.role)
        return found

    @_memo
    def workspace_role(self, who: Who, ws: int) -> str | None:
        if not self.person_ok(who) or self.w.ws(ws).tenant != who.tenant:
            return None
        for m in self.w.members:
            if m.ws == ws and m.user == who.user:
                return m.role
        return None

    # -- the tree ------------------------------------------------------------------------------

    @_memo
    def path(self, d: WDoc) -> list[WDoc]:
        out = [d]
        while out[-1].parent is not None:
            out.append(self.w.doc(out[-1].parent))
        return out

    @_memo
    def customs(self, d: WDoc) -> list[WDoc]:
        return [n for n in self.path(d) if n.mode == "custom"]

    @_memo
    def visibility(self, d: WDoc) -> str:
        for n in self.customs(d):
            if n.visibility is not None:
                return n.visibility
        return self.w.kb(d.kb).visibility

    @_memo
    def status(self, d: WDoc) -> str:
        return HIDDEN[max(HIDDEN.index(n.status) for n in self.path(d))]

    @_memo
    def role(self, who: Who, d: WDoc) -> str | None:
        customs = self.customs(d)
        if not customs:
            roles = self.roles_on(who, "knowledge_base", d.kb)
        else:
            roles = self.roles_on(who, "document", customs[0].n)
            containers = [("knowledge_base", d.kb)] + [("document", c.n) for c in customs[1:]]
            for otype, n in containers:
                if any(r in ("owner", "manager") for r in self.roles_on(who, otype, n)):
                    roles.append("manager")
        return max(roles, key=RANK.__getitem__) if roles else None

    @_memo
    def may_open(self, who: Who, d: WDoc) -> bool:
        if self.role(who, d) is not None:
            return True
        vis = self.visibility(d)
        if vis == "public":
            return True
        return vis == "workspace" and self.workspace_role(who, self.w.kb(d.kb).ws) in ("owner", "admin", "member")

    def person_may_open(self, who: Who, d: WDoc) -> bool:
        return self.may_open(who, d) and all(self.may_open(who, c) for c in self.customs(d))

    def everyone_may_open(self, d: WDoc) -> bool:
        return self.visibility(d) == "public" and all(self.visibility(c) == "public" for c in self.customs(d))

    # -- the matrix ----------------------------------------------------------------------------

    def by_status(self, action: str, who: Who, d: WDoc, role: str | None) -> bool:
        r = RANK.get(role, 0) if role else 0
        st = self.status(d)
        kb = self.w.kb(d.kb)
        if action == "read":
            return st == "published" or (st in ("draft", "archived") and r >= 2)
        if action == "search":
            if who.tenant != self.w.kb_tenant(d.kb) or kb.status != "active":
                return False
            return st == "published" or (st == "draft" and r >= 2)
        if action == "trash":
            return st == "deleted" and r >= 3
        if st == "deleted":
            return False
        if action in ("edit", "create_child", "move"):
            return kb.status == "active" and r >= 2
        if action == "delete":
            return kb.status == "active" and (r >= 3 or (r == 2 and kb.editor_can_delete))
        if action == "manage":
            return r >= 3
        if action == "share":
            return r >= 3 or (r == 2 and kb.editor_can_share)
        if action == "transfer_owner":
            return r == 4
        raise AssertionError(action)

    def person_allows(self, who: Who, d: WDoc, action: str) -> bool:
        if not self.person_ok(who):
            return False
        if who.scopes is not None:
            needed = READ_SCOPES if action in ("read", "search", "trash") else WRITE_SCOPES
            if not who.scopes & needed:
                return False
        if not self.person_may_open(who, d):
            return False
        return self.by_status(action, who, d, self.role(who, d))

    def link_alive(self, who: Who) -> bool:
        link = next(x for x in self.w.links if x.n == who.link)
        if link.revoked or link.expired or self.w.object_tenant(link.object_type, link.object_n) != who.tenant:
            return False
        if link.require_login or link.restrict:
            if not self.person_ok(who):
                return False
        if link.restrict:
            kb_n = link.object_n if link.object_type == "knowledge_base" else self.w.doc(link.object_n).kb
            return self.workspace_role(who, self.w.kb(kb_n).ws) is not None
        return True

    def link_covers(self, who: Who, d: WDoc) -> bool:
        link = next(x for x in self.w.links if x.n == who.link)
        path = self.path(d)
        if link.object_type == "knowledge_base":
            return link.object_n == d.kb and not any(n.mode == "custom" for n in path)
        ns = [n.n for n in path]
        if link.object_n not in ns:
            return False
        below = path[: ns.index(link.object_n)]
        return not any(n.mode == "custom" for n in below)

    def allows(self, who: Who, doc_n: int, action: str) -> bool:
        d = self.w.doc(doc_n)
        if who.kind == "system":
            return action in ("read", "search", "trash")
        if who.kind == "user":
            return self.person_allows(who, d, action)
        if action not in ("read", "search"):
            return False
        if who.kind == "anonymous":
            return self.everyone_may_open(d) and self.by_status(action, who, d, None)
        if who.kind == "share_link":
            if who.user is not None and self.person_allows(who, d, action):
                return True
            return self.link_alive(who) and self.link_covers(who, d) and self.by_status(action, who, d, None)
        if who.kind == "dify_key":
            key = next(f for f in self.w.difys if f.n == who.dify)
            if key.status != "active" or key.expired or d.kb not in key.allowed:
                return False
            if self.w.kb_tenant(d.kb) != who.tenant:
                return False
            if self.customs(d) and not self.everyone_may_open(d):
                return False
            return self.by_status(action, who, d, None)
        raise AssertionError(who.kind)

    def effective_role(self, who: Who, doc_n: int) -> str | None:
        d = self.w.doc(doc_n)
        if who.kind != "user" or not self.person_ok(who):
            return None
        if not all(self.may_open(who, c) for c in self.customs(d)):
            return None
        return self.role(who, d)

    # -- knowledge bases -----------------------------------------------------------------------

    def kb_role(self, who: Who, kb_n: int) -> str | None:
        if who.kind != "user":
            return None
        roles = self.roles_on(who, "knowledge_base", kb_n)
        return max(roles, key=RANK.__getitem__) if roles else None

    def kb_allows(self, who: Who, kb_n: int, action: str) -> bool:
        kb = self.w.kb(kb_n)
        if action == "read":
            if who.kind == "system":
                return True
            if who.kind == "dify_key":
                key = next(f for f in self.w.difys if f.n == who.dify)
                return (
                    key.status == "active"
                    and not key.expired
                    and kb_n in key.allowed
                    and self.w.kb_tenant(kb_n) == who.tenant
                )
            if who.kind == "anonymous":
                return kb.visibility == "public"
            if who.kind == "share_link":
                link = next(x for x in self.w.links if x.n == who.link)
                if self.link_alive(who) and link.object_type == "knowledge_base" and link.object_n == kb_n:
                    return True
            if not self.person_ok(who) or (who.scopes is not None and not who.scopes & READ_SCOPES):
                return False
            if self.roles_on(who, "knowledge_base", kb_n) or kb.visibility == "public":
                return True
            return kb.visibility == "workspace" and self.workspace_role(who, kb.ws) in ("owner", "admin", "member")
        if who.kind != "user" or not self.person_ok(who):
            return False
        if who.scopes is not None and not who.scopes & WRITE_SCOPES:
            return False
        r = RANK.get(self.kb_role(who, kb_n) or "", 0)
        if action == "create":
            return kb.status == "active" and r >= 2
        if action in ("manage", "invite"):
            return r >= 3
        if action == "share":
            return r >= 3 or (r == 2 and kb.editor_can_share)
        if action == "transfer_owner":
            return r == 4
        raise AssertionError(action)

    # -- workspaces ----------------------------------------------------------------------------

    def ws_allows(self, who: Who, ws_n: int, action: str) -> bool:
        """Workspace roles act on the workspace only: any member sees it; guests do not see
        who else is in it and create no knowledge bases; owners/admins manage and invite; the
        owner transfers and deletes. Everything but seeing needs a write scope."""
        if who.kind != "user":
            return False
        role = self.workspace_role(who, ws_n)
        if role is None:
            return False
        if action == "read":
            return True
        if action == "list_members":
            return role != "guest"
        if who.scopes is not None and not who.scopes & WRITE_SCOPES:
            return False
        if action == "create_knowledge_base":
            return role != "guest"
        if action in ("manage", "invite"):
            return role in ("owner", "admin")
        if action in ("transfer_owner", "delete"):
            return role == "owner"
        raise AssertionError(action)

    # -- the change log ------------------------------------------------------------------------

    def change_visible(self, who: Who, tenant: str, actor: int | None, kb_n: int | None) -> bool:
        """One's own changes, and every change in a knowledge base one may manage; active
        people of the change's tenant only."""
        if who.kind != "user" or not self.person_ok(who) or tenant != who.tenant:
            return False
        if actor is not None and actor == who.user:
            return True
        return kb_n is not None and self.w.kb_tenant(kb_n) == tenant and self.kb_allows(who, kb_n, "manage")
