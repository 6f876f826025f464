"""Random permission worlds as plain data (Hypothesis), and a bulk insert of one world.

Ids are deterministic and readable (``uid("doc", 3)`` -> ``...-d0c000000003``) because every
example is rolled back to a savepoint: a shrunk failure prints a world you can read and rebuild.
Tenant "A" is the main tenant; tenant "B" exists to prove that nothing crosses.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st
from sqlalchemy import insert
from sqlmodel import Session

from openkb.models import (
    Collaborator,
    DifyApiKey,
    Document,
    Group,
    GroupMember,
    KnowledgeBase,
    ShareLink,
    Tenant,
    TenantMembership,
    User,
    Workspace,
    WorkspaceMember,
)

_PREFIX = {
    "tenant": 0x7E,
    "user": 0x05E,
    "group": 0x6A,
    "ws": 0x3A,
    "kb": 0x4B,
    "doc": 0xD0C,
    "link": 0x5A,
    "dify": 0xD1F,
}


def uid(kind: str, n: int | str) -> uuid.UUID:
    if kind == "tenant":
        n = {"A": 1, "B": 2}[str(n)]
    return uuid.UUID(int=(_PREFIX[kind] << 48) | int(n))


@dataclass(frozen=True)
class WUser:
    n: int
    tenant: str
    status: str
    tenant_role: str | None  # None: no tenant membership
    email_domain: str = "a.example"


@dataclass(frozen=True)
class WGroup:
    n: int
    tenant: str
    members: tuple[int, ...]


@dataclass(frozen=True)
class WWorkspace:
    n: int
    tenant: str


@dataclass(frozen=True)
class WMember:
    ws: int
    user: int
    role: str


@dataclass(frozen=True)
class WKb:
    n: int
    ws: int
    visibility: str
    status: str = "active"
    editor_can_delete: bool = False
    editor_can_share: bool = False


@dataclass(frozen=True)
class WDoc:
    n: int
    kb: int
    parent: int | None
    type: str
    status: str
    mode: str
    visibility: str | None


@dataclass(frozen=True)
class WGrant:
    object_type: str  # "knowledge_base" | "document"
    object_n: int
    subject_type: str  # "user" | "group"
    subject_n: int
    role: str


@dataclass(frozen=True)
class WLink:
    n: int
    object_type: str
    object_n: int
    revoked: bool = False
    expired: bool = False
    require_login: bool = False
    restrict: bool = False


@dataclass(frozen=True)
class WDify:
    n: int
    allowed: tuple[int, ...]
    status: str = "active"
    expired: bool = False


@dataclass
class World:
    users: list[WUser]
    workspaces: list[WWorkspace]
    members: list[WMember]
    groups: list[WGroup]
    kbs: list[WKb]
    docs: list[WDoc]
    grants: list[WGrant]
    links: list[WLink] = field(default_factory=list)
    difys: list[WDify] = field(default_factory=list)

    # lookups (indexed: the oracle asks them hundreds of thousands of times; rebuilt if a test
    # replaces or extends one of the lists)
    @property
    def _index(self) -> dict[str, dict[int, object]]:
        key = tuple((id(x), len(x)) for x in (self.users, self.workspaces, self.kbs, self.docs, self.groups))
        cached = self.__dict__.get("_index_cache")
        if cached is None or cached[0] != key:
            cached = (
                key,
                {
                    "user": {u.n: u for u in self.users},
                    "ws": {x.n: x for x in self.workspaces},
                    "kb": {k.n: k for k in self.kbs},
                    "doc": {d.n: d for d in self.docs},
                    "group": {g.n: g for g in self.groups},
                },
            )
            self.__dict__["_index_cache"] = cached
        return cached[1]

    def user(self, n: int) -> WUser:
        return self._index["user"][n]  # type: ignore[return-value]

    def ws(self, n: int) -> WWorkspace:
        return self._index["ws"][n]  # type: ignore[return-value]

    def kb(self, n: int) -> WKb:
        return self._index["kb"][n]  # type: ignore[return-value]

    def doc(self, n: int) -> WDoc:
        return self._index["doc"][n]  # type: ignore[return-value]

    def group(self, n: int) -> WGroup:
        return self._index["group"][n]  # type: ignore[return-value]

    def kb_tenant(self, kb_n: int) -> str:
        return self.ws(self.kb(kb_n).ws).tenant

    def object_tenant(self, otype: str, n: int) -> str:
        return self.kb_tenant(n if otype == "knowledge_base" else self.doc(n).kb)

    def describe(self) -> str:
        lines = ["World:"]
        lines += [f"  user u{u.n} tenant={u.tenant} status={u.status} tenant_role={u.tenant_role}" for u in self.users]
        lines += [f"  group g{g.n} tenant={g.tenant} members={[f'u{m}' for m in g.members]}" for g in self.groups]
        lines += [f"  workspace w{w.n} tenant={w.tenant}" for w in self.workspaces]
        lines += [f"  member w{m.ws} u{m.user} {m.role}" for m in self.members]
        lines += [
            f"  kb k{k.n} in w{k.ws} vis={k.visibility} status={k.status} editor_can_delete={k.editor_can_delete}"
            f" editor_can_share={k.editor_can_share}"
            for k in self.kbs
        ]
        lines += [
            f"  doc d{d.n} kb=k{d.kb} parent={f'd{d.parent}' if d.parent is not None else '-'} {d.type}"
            f" {d.status} {d.mode} vis={d.visibility}"
            for d in self.docs
        ]
        lines += [
            f"  grant {'k' if g.object_type == 'knowledge_base' else 'd'}{g.object_n} -> "
            f"{'u' if g.subject_type == 'user' else 'g'}{g.subject_n} {g.role}"
            for g in self.grants
        ]
        lines += [
            f"  link l{s.n} on {'k' if s.object_type == 'knowledge_base' else 'd'}{s.object_n} revoked={s.revoked}"
            f" expired={s.expired} require_login={s.require_login} restrict={s.restrict}"
            for s in self.links
        ]
        lines += [
            f"  dify f{f.n} allowed={[f'k{k}' for k in f.allowed]} status={f.status} expired={f.expired}"
            for f in self.difys
        ]
        return "\n".join(lines)


VIS = ("private", "workspace", "public")


@st.composite
def worlds(draw: st.DrawFn, max_docs: int = 10) -> World:
    users: list[WUser] = []
    for i in range(1, draw(st.integers(2, 5)) + 1):
        users.append(
            WUser(
                n=i,
                tenant="A",
                status=draw(st.sampled_from(["active"] * 6 + ["suspended", "pending_activation", "deleted"])),
                tenant_role=draw(st.sampled_from(["member", "member", "member", "tenant_admin", "system_admin", None])),
                email_domain=draw(st.sampled_from(["a.example", "b.example"])),
            )
        )
    b_user = len(users) + 1
    users.append(WUser(n=b_user, tenant="B", status="active", tenant_role="member"))
    a_users = [u.n for u in users if u.tenant == "A"]

    workspaces = [WWorkspace(i, "A") for i in range(1, draw(st.integers(1, 2)) + 1)]
    workspaces.append(WWorkspace(len(workspaces) + 1, "B"))
    members: list[WMember] = []
    for w in workspaces:
        candidates = a_users if w.tenant == "A" else [b_user] + a_users[:1]
        for u in candidates:
            role = draw(st.sampled_from([None, None, "owner", "admin", "member", "member", "guest", "guest"]))
            if role is not None:
                members.append(WMember(w.n, u, role))

    groups: list[WGroup] = []
    for i in range(1, draw(st.integers(0, 2)) + 1):
        groups.append(WGroup(i, "A", tuple(sorted(draw(st.sets(st.sampled_from(a_users), max_size=3))))))
    if draw(st.booleans()):
        groups.append(WGroup(len(groups) + 1, "B", (a_users[0], b_user)))

    kbs: list[WKb] = []
    for i in range(1, draw(st.integers(1, 3)) + 1):
        kbs.append(
            WKb(
                n=i,
                ws=draw(st.sampled_from([w.n for w in workspaces if w.tenant == "A"])),
                visibility=draw(st.sampled_from(VIS)),
                status=draw(st.sampled_from(["active"] * 5 + ["archived"])),
                editor_can_delete=draw(st.booleans()),
                editor_can_share=draw(st.booleans()),
            )
        )
    if draw(st.booleans()):
        kbs.append(WKb(n=len(kbs) + 1, ws=workspaces[-1].n, visibility=draw(st.sampled_from(VIS))))

    docs: list[WDoc] = []
    for i in range(1, draw(st.integers(0, max_docs)) + 1):
        kb = draw(st.sampled_from([k.n for k in kbs]))
        same_kb = [d.n for d in docs if d.kb == kb]
        parent = draw(st.sampled_from([None] + same_kb)) if same_kb else None
        docs.append(
            WDoc(
                n=i,
                kb=kb,
                parent=parent,
                type=draw(st.sampled_from(["folder", "page"])),
                status=draw(st.sampled_from(["published"] * 5 + ["draft", "draft", "archived", "deleted"])),
                mode=draw(st.sampled_from(["inherit", "inherit", "custom"])),
                visibility=draw(st.sampled_from([None, None, *VIS])),
            )
        )

    objects = [("knowledge_base", k.n) for k in kbs] + [("document", d.n) for d in docs]
    subjects = [("user", u.n) for u in users] + [("group", g.n) for g in groups]
    grants: list[WGrant] = []
    seen: set[tuple] = set()
    for _ in range(draw(st.integers(0, 10))):
        obj = draw(st.sampled_from(objects))
        subj = draw(st.sampled_from(subjects))
        if (obj, subj) in seen:
            continue
        seen.add((obj, subj))
        grants.append(
            WGrant(
                obj[0],
                obj[1],
                subj[0],
                subj[1],
                draw(st.sampled_from(["owner", "manager", "editor", "viewer", "viewer"])),
            )
        )

    links: list[WLink] = []
    for i in range(1, draw(st.integers(0, 3)) + 1):
        obj = draw(st.sampled_from(objects))
        links.append(
            WLink(
                i,
                obj[0],
                obj[1],
                revoked=draw(st.sampled_from([False, False, False, True])),
                expired=draw(st.sampled_from([False, False, False, True])),
                require_login=draw(st.booleans()),
                restrict=draw(st.booleans()),
            )
        )

    difys: list[WDify] = []
    if draw(st.booleans()):
        difys.append(
            WDify(
                1,
                tuple(sorted(draw(st.sets(st.sampled_from([k.n for k in kbs]), max_size=3)))),
                status=draw(st.sampled_from(["active", "active", "active", "disabled"])),
                expired=draw(st.sampled_from([False, False, False, True])),
            )
        )
    return World(users, workspaces, members, groups, kbs, docs, grants, links, difys)


def _rows(table, rows: list[dict]) -> tuple:
    return (insert(table.__table__), rows)


def insert_world(s: Session, w: World) -> None:
    """About a dozen statements per world (one executemany per table)."""
    now = datetime.now(UTC)
    creator = uid("user", w.users[0].n)
    batches = [
        (Tenant, [{"id": uid("tenant", t), "name": f"Tenant {t}", "slug": f"world-tenant-{t}"} for t in ("A", "B")]),
        (
            User,
            [
                {
                    "id": uid("user", u.n),
                    "email": f"u{u.n}@{u.email_domain}",
                    "display_name": f"u{u.n}",
                    "status": u.status,
                }
                for u in w.users
            ],
        ),
        (
            TenantMembership,
            [
                {
                    "id": uuid.uuid4(),
                    "tenant_id": uid("tenant", u.tenant),
                    "user_id": uid("user", u.n),
                    "role": u.tenant_role,
                }
                for u in w.users
                if u.tenant_role
            ],
        ),
        (
            Group,
            [
                {
                    "id": uid("group", g.n),
                    "tenant_id": uid("tenant", g.tenant),
                    "name": f"g{g.n}",
                    "created_by": creator,
                }
                for g in w.groups
            ],
        ),
        (
            GroupMember,
            [
                {
                    "id": uuid.uuid4(),
                    "tenant_id": uid("tenant", g.tenant),
                    "group_id": uid("group", g.n),
                    "user_id": uid("user", m),
                }
                for g in w.groups
                for m in g.members
            ],
        ),
        (
            Workspace,
            [
                {
                    "id": uid("ws", x.n),
                    "tenant_id": uid("tenant", x.tenant),
                    "name": f"w{x.n}",
                    "slug": f"w{x.n}",
                    "created_by": creator,
                }
                for x in w.workspaces
            ],
        ),
        (
            WorkspaceMember,
            [
                {
                    "id": uuid.uuid4(),
                    "tenant_id": uid("tenant", w.ws(m.ws).tenant),
                    "workspace_id": uid("ws", m.ws),
                    "user_id": uid("user", m.user),
                    "role": m.role,
                }
                for m in w.members
            ],
        ),
        (
            KnowledgeBase,
            [
                {
                    "id": uid("kb", k.n),
                    "tenant_id": uid("tenant", w.kb_tenant(k.n)),
                    "workspace_id": uid("ws", k.ws),
                    "title": f"k{k.n}",
                    "slug": f"k{k.n}",
                    "visibility": k.visibility,
                    "status": k.status,
                    "created_by": creator,
                    "settings": {
                        "editor_can_delete": k.editor_can_delete,
                        "editor_can_create_share_links": k.editor_can_share,
                    },
                }
                for k in w.kbs
            ],
        ),
        (
            Document,
            [
                {
                    "id": uid("doc", d.n),
                    "tenant_id": uid("tenant", w.kb_tenant(d.kb)),
                    "workspace_id": uid("ws", w.kb(d.kb).ws),
                    "knowledge_base_id": uid("kb", d.kb),
                    "parent_id": uid("doc", d.parent) if d.parent is not None else None,
                    "type": d.type,
                    "title": f"d{d.n}",
                    "slug": f"d{d.n}",
                    "status": d.status,
                    "permission_mode": d.mode,
                    "visibility": d.visibility,
                    "created_by": creator,
                    "updated_by": creator,
                }
                for d in w.docs
            ],
        ),
        (
            Collaborator,
            [
                {
                    "id": uuid.uuid4(),
                    "tenant_id": uid("tenant", w.object_tenant(g.object_type, g.object_n)),
                    "object_type": g.object_type,
                    "object_id": uid("kb" if g.object_type == "knowledge_base" else "doc", g.object_n),
                    "subject_type": g.subject_type,
                    "subject_id": uid("user" if g.subject_type == "user" else "group", g.subject_n),
                    "role": g.role,
                    "source": "direct",
                }
                for g in w.grants
            ],
        ),
        (
            ShareLink,
            [
                {
                    "id": uid("link", x.n),
                    "tenant_id": uid("tenant", w.object_tenant(x.object_type, x.object_n)),
                    "object_type": x.object_type,
                    "object_id": uid("kb" if x.object_type == "knowledge_base" else "doc", x.object_n),
                    "token_hash": f"world-link-{x.n}",
                    "permission": "view",
                    "require_login": x.require_login,
                    "restrict_to_workspace_members": x.restrict,
                    "revoked_at": now - timedelta(hours=1) if x.revoked else None,
                    "expires_at": now - timedelta(hours=1) if x.expired else now + timedelta(days=1),
                    "created_by": creator,
                }
                for x in w.links
            ],
        ),
        (
            DifyApiKey,
            [
                {
                    "id": uid("dify", f.n),
                    "tenant_id": uid("tenant", "A"),
                    "name": f"f{f.n}",
                    "key_hash": f"world-dify-{f.n}",
                    "status": f.status,
                    "allowed_knowledge_base_ids": [uid("kb", k) for k in f.allowed],
                    "expires_at": now - timedelta(hours=1) if f.expired else None,
                }
                for f in w.difys
            ],
        ),
    ]
    for model, rows in batches:
        if rows:
            s.execute(insert(model.__table__), rows)
