"""Plain factory functions and the persona world used across tests.

They insert rows directly (no services) so tests of a service don't depend on that service.
"""

from __future__ import annotations

import hashlib
import itertools
import uuid
from dataclasses import dataclass, field

from sqlmodel import Session

from openkb.models import (
    Collaborator,
    Document,
    DocumentVersion,
    Group,
    GroupMember,
    KnowledgeBase,
    Tenant,
    TenantMembership,
    User,
    Workspace,
    WorkspaceMember,
)

_seq = itertools.count(1)


def _n() -> int:
    return next(_seq)


def make_tenant(s: Session, name: str | None = None) -> Tenant:
    n = _n()
    t = Tenant(name=name or f"Tenant {n}", slug=f"t-{n}-{uuid.uuid4().hex[:6]}")
    s.add(t)
    s.flush()
    return t


def make_user(
    s: Session,
    tenant: Tenant,
    *,
    role: str = "member",
    status: str = "active",
    email: str | None = None,
    display_name: str | None = None,
) -> User:
    n = _n()
    u = User(
        email=email or f"user{n}-{uuid.uuid4().hex[:6]}@example.com",
        display_name=display_name or f"User {n}",
        status=status,
        password_hash=None,
    )
    s.add(u)
    s.flush()
    s.add(TenantMembership(tenant_id=tenant.id, user_id=u.id, role=role))
    s.flush()
    return u


def make_workspace(s: Session, tenant: Tenant, owner: User, name: str | None = None) -> Workspace:
    n = _n()
    w = Workspace(tenant_id=tenant.id, name=name or f"Space {n}", slug=f"ws-{n}", created_by=owner.id)
    s.add(w)
    s.flush()
    s.add(WorkspaceMember(tenant_id=tenant.id, workspace_id=w.id, user_id=owner.id, role="owner"))
    s.flush()
    return w


def add_member(s: Session, ws: Workspace, user: User, role: str) -> WorkspaceMember:
    m = WorkspaceMember(tenant_id=ws.tenant_id, workspace_id=ws.id, user_id=user.id, role=role)
    s.add(m)
    s.flush()
    return m


def make_kb(
    s: Session,
    ws: Workspace,
    owner: User,
    *,
    visibility: str = "workspace",
    title: str | None = None,
    settings: dict | None = None,
    add_owner: bool = True,
) -> KnowledgeBase:
    n = _n()
    kb = KnowledgeBase(
        tenant_id=ws.tenant_id,
        workspace_id=ws.id,
        title=title or f"KB {n}",
        slug=f"kb-{n}",
        visibility=visibility,
        status="active",
        settings=settings or {},
        created_by=owner.id,
    )
    s.add(kb)
    s.flush()
    if add_owner:
        grant(s, "knowledge_base", kb.id, owner, "owner", tenant_id=ws.tenant_id)
    return kb


def grant(
    s: Session, object_type: str, object_id: uuid.UUID, subject: User | Group, role: str, *, tenant_id: uuid.UUID
) -> Collaborator:
    c = Collaborator(
        tenant_id=tenant_id,
        object_type=object_type,
        object_id=object_id,
        subject_type="group" if isinstance(subject, Group) else "user",
        subject_id=subject.id,
        role=role,
        source="direct",
    )
    s.add(c)
    s.flush()
    return c


def make_group(s: Session, tenant: Tenant, creator: User, members: list[User] = ()) -> Group:  # type: ignore[assignment]
    g = Group(tenant_id=tenant.id, name=f"group-{_n()}", created_by=creator.id)
    s.add(g)
    s.flush()
    for u in members:
        s.add(GroupMember(tenant_id=tenant.id, group_id=g.id, user_id=u.id))
    s.flush()
    return g


def make_doc(
    s: Session,
    kb: KnowledgeBase,
    author: User,
    *,
    parent: Document | None = None,
    type: str = "page",
    title: str | None = None,
    markdown: str | None = None,
    status: str = "published",
    permission_mode: str = "inherit",
    visibility: str | None = None,
    meta: dict | None = None,
    tags: list[str] | None = None,
) -> Document:
    n = _n()
    d = Document(
        tenant_id=kb.tenant_id,
        workspace_id=kb.workspace_id,
        knowledge_base_id=kb.id,
        parent_id=parent.id if parent else None,
        type=type,
        title=title or f"Doc {n}",
        slug=f"doc-{n}",
        status=status,
        permission_mode=permission_mode,
        visibility=visibility,
        created_by=author.id,
        updated_by=author.id,
        meta=meta or {},
        tags=tags or [],
    )
    s.add(d)
    s.flush()
    if type == "page":
        md = markdown if markdown is not None else f"# {d.title}\n\nBody {n}\n"
        v = DocumentVersion(
            tenant_id=kb.tenant_id,
            document_id=d.id,
            version_no=1,
            title=d.title,
            markdown=md,
            markdown_hash=hashlib.sha256(md.encode()).hexdigest(),
            source_type="manual",
            created_by=author.id,
        )
        s.add(v)
        s.flush()
        d.current_version_id = v.id
        s.add(d)
        s.flush()
    return d


@dataclass
class Personas:
    """A tenant with one workspace and a person in every role, plus people who must see nothing."""

    tenant: Tenant
    workspace: Workspace
    owner: User
    admin: User
    member: User
    guest: User
    outsider: User  # same tenant, not in the workspace
    other_tenant_user: User
    tenant_admin: User
    other_tenant: Tenant
    extra: dict = field(default_factory=dict)


def make_personas(s: Session) -> Personas:
    t = make_tenant(s)
    owner = make_user(s, t)
    ws = make_workspace(s, t, owner)
    admin, member, guest, outsider = (make_user(s, t) for _ in range(4))
    add_member(s, ws, admin, "admin")
    add_member(s, ws, member, "member")
    add_member(s, ws, guest, "guest")
    tadmin = make_user(s, t, role="tenant_admin")
    add_member(s, ws, tadmin, "admin")
    other = make_tenant(s)
    other_user = make_user(s, other)
    return Personas(t, ws, owner, admin, member, guest, outsider, other_user, tadmin, other)
