"""Workspaces and their members (docs/permissions.md#roles).

A workspace is visible to its members only (any role, guests included); owners and admins
manage it. Membership changes go through ``openkb.permissions.members`` (which audits them);
this module adds the change-log rows so they can be listed and reverted like any other write.

Decision: any active user of a tenant may create a workspace and becomes its owner.
"""

from __future__ import annotations

import re
import secrets
import uuid
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from openkb.accounts.users import normalize_email
from openkb.content import limits
from openkb.content.actor import Actor
from openkb.content.changes import record_change
from openkb.errors import AlreadyExists, NotFound, PermissionDenied, RevertConflict, ValidationError
from openkb.models import Change, KnowledgeBase, TenantMembership, User, Workspace, WorkspaceMember
from openkb.models._base import utcnow
from openkb.permissions import Principal, WsAction, access_workspace
from openkb.permissions import members as member_service
from openkb.permissions.collaborators import do_add_workspace_member

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def check_slug(slug: str, field: str = "slug") -> str:
    limits.check_text(slug, field)
    s = slug.strip().lower()
    if not SLUG_RE.match(s):
        raise ValidationError(
            f"{field} must be 1-63 lowercase letters, digits and dashes, starting with a letter or digit", field=field
        )
    return s


def slugify(text_: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text_.lower()).strip("-")[:48].strip("-")
    return s or secrets.token_hex(4)


def unique_slug(taken: set[str], base: str) -> str:
    if base not in taken:
        return base
    for _ in range(20):
        cand = f"{base[:54]}-{secrets.token_hex(3)}"
        if cand not in taken:
            return cand
    return secrets.token_hex(8)


def choose_slug(taken: set[str], requested: str | None, name: str, duplicate: str) -> str:
    """The slug a new object gets: the requested one (checked; ``AlreadyExists`` with the message
    ``duplicate`` if ``taken`` holds it), else one made from ``name`` that ``taken`` does not hold."""
    if requested is None:
        return unique_slug(taken, slugify(name))
    s = check_slug(requested)
    if s in taken:
        raise AlreadyExists(duplicate.format(slug=s), field="slug")
    return s


def workspace_out(ws: Workspace, role: str | None = None) -> dict[str, Any]:
    return {
        "id": ws.id,
        "name": ws.name,
        "slug": ws.slug,
        "description": ws.description,
        "role": role,
        "created_by": ws.created_by,
        "created_at": ws.created_at,
        "updated_at": ws.updated_at,
    }


def _require_writer(actor: Actor) -> None:
    actor.user_id  # noqa: B018 - raises Unauthenticated for non-users
    if not actor.principal.has_write_scope():
        raise PermissionDenied("this token may not write (it needs kb:write or doc:write)")


def list_workspaces(session: Session, principal: Principal) -> list[dict[str, Any]]:
    """The workspaces the caller is a member of (its memberships are the scope)."""
    if principal.kind != "user" or principal.tenant_id is None:
        return []
    rows = session.exec(
        select(Workspace, WorkspaceMember.role)
        .join(WorkspaceMember, col(WorkspaceMember.workspace_id) == Workspace.id)
        .where(col(WorkspaceMember.user_id) == principal.user_id, col(Workspace.tenant_id) == principal.tenant_id)
        .order_by(col(Workspace.created_at))
    ).all()
    return [workspace_out(ws, role) for ws, role in rows]


def create_workspace(
    session: Session, actor: Actor, *, name: str, slug: str | None = None, description: str | None = None
) -> Workspace:
    _require_writer(actor)
    name = limits.check_name(name)
    desc = limits.check_name(description, "description", allow_empty=True) if description is not None else None
    tenant = actor.tenant_id
    taken = set(session.exec(select(Workspace.slug).where(col(Workspace.tenant_id) == tenant)).all())
    s = choose_slug(taken, slug, name, "a workspace with slug {slug!r} already exists")
    ws = Workspace(tenant_id=tenant, name=name, slug=s, description=desc or None, created_by=actor.user_id)
    session.add(ws)
    session.flush()
    do_add_workspace_member(session, tenant_id=tenant, workspace_id=ws.id, user_id=actor.user_id, role="owner")
    record_change(
        session,
        actor,
        op="workspace.create",
        object_type="workspace",
        object_id=ws.id,
        summary=f"created workspace {name!r}",
        scope={"workspace_id": ws.id},
        before={},
        after={"name": ws.name, "slug": ws.slug, "description": ws.description},
    )
    return ws


def update_workspace(
    session: Session, actor: Actor, workspace_id: uuid.UUID, fields: dict[str, Any], *, reverts: Change | None = None
) -> Workspace:
    ws = access_workspace(session, actor.principal, workspace_id, WsAction.MANAGE).workspace
    unknown = set(fields) - {"name", "slug", "description"}
    if unknown:
        raise ValidationError(f"cannot update {', '.join(sorted(unknown))}", field=sorted(unknown)[0])
    for k, v in fields.items():
        if v is None and k != "description":
            raise ValidationError(f"{k} cannot be null", field=k)
    new: dict[str, Any] = {}
    if "name" in fields:
        new["name"] = limits.check_name(fields["name"])
    if "description" in fields:
        d = fields["description"]
        new["description"] = (limits.check_name(d, "description", allow_empty=True) or None) if d is not None else None
    if "slug" in fields:
        s = check_slug(fields["slug"])
        if (
            s != ws.slug
            and session.exec(
                select(Workspace.id).where(col(Workspace.tenant_id) == ws.tenant_id, col(Workspace.slug) == s)
            ).first()
        ):
            raise AlreadyExists(f"a workspace with slug {s!r} already exists", field="slug")
        new["slug"] = s
    changed = {k: v for k, v in new.items() if getattr(ws, k) != v}
    if not changed:
        return ws
    before = {k: getattr(ws, k) for k in changed}
    for k, v in changed.items():
        setattr(ws, k, v)
    ws.updated_at = utcnow()
    session.add(ws)
    session.flush()
    record_change(
        session,
        actor,
        op="workspace.update",
        object_type="workspace",
        object_id=ws.id,
        summary=f"updated {', '.join(sorted(changed))} of workspace {ws.name!r}",
        scope={"workspace_id": ws.id},
        before=before,
        after=changed,
        reverts=reverts,
    )
    return ws


def delete_empty_workspace(session: Session, actor: Actor, workspace_id: uuid.UUID, *, reverts: Change) -> None:
    """Only as the revert of ``workspace.create``: refuses a workspace that has knowledge bases."""
    ws = access_workspace(session, actor.principal, workspace_id, WsAction.DELETE).workspace
    n = session.exec(
        select(func.count()).select_from(KnowledgeBase).where(col(KnowledgeBase.workspace_id) == workspace_id)
    ).one()
    if n:
        raise RevertConflict("the workspace has knowledge bases; it cannot be removed by a revert")
    record_change(
        session,
        actor,
        op="workspace.remove",
        object_type="workspace",
        object_id=ws.id,
        summary=f"removed workspace {ws.name!r}",
        scope={"workspace_id": ws.id},
        before={"name": ws.name, "slug": ws.slug, "description": ws.description},
        after={},
        reverts=reverts,
    )
    session.delete(ws)
    session.flush()


# -- members ------------------------------------------------------------------------------------


def member_out(m: WorkspaceMember, user: User | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": m.id,
        "workspace_id": m.workspace_id,
        "user_id": m.user_id,
        "role": m.role,
        "created_at": m.created_at,
    }
    if user is not None:
        out["email"] = user.email
        out["display_name"] = user.display_name
    return out


def list_members(session: Session, principal: Principal, workspace_id: uuid.UUID) -> list[dict[str, Any]]:
    """Members with their emails: for owners, admins and members — not guests
    (``WsAction.LIST_MEMBERS``; docs/permissions.md)."""
    access_workspace(session, principal, workspace_id, WsAction.LIST_MEMBERS)
    rows = session.exec(
        select(WorkspaceMember, User)
        .join(User, col(User.id) == WorkspaceMember.user_id)
        .where(col(WorkspaceMember.workspace_id) == workspace_id)
        .order_by(col(WorkspaceMember.created_at))
    ).all()
    return [member_out(m, u) for m, u in rows]


def _resolve_user(session: Session, tenant_id: uuid.UUID, user_id: uuid.UUID | None, email: str | None) -> uuid.UUID:
    if (user_id is None) == (email is None):
        raise ValidationError("give exactly one of user_id or email", field="user_id")
    if user_id is not None:
        return user_id
    e = normalize_email(limits.check_text(email or "", "email"))
    uid = session.exec(
        select(User.id)
        .join(TenantMembership, col(TenantMembership.user_id) == User.id)
        .where(func.lower(User.email) == e, col(TenantMembership.tenant_id) == tenant_id)
    ).first()
    if uid is None:
        raise NotFound("user not found (invite people who have no account with POST .../invitations)")
    return uid


def member_key(workspace_id: uuid.UUID, user_id: uuid.UUID) -> uuid.UUID:
    """The change-log object id of one membership (stable across remove and re-add)."""
    return uuid.uuid5(workspace_id, str(user_id))


def _current_role(session: Session, workspace_id: uuid.UUID, user_id: uuid.UUID) -> str | None:
    return session.exec(
        select(WorkspaceMember.role).where(
            col(WorkspaceMember.workspace_id) == workspace_id, col(WorkspaceMember.user_id) == user_id
        )
    ).first()


def add_member(
    session: Session,
    actor: Actor,
    workspace_id: uuid.UUID,
    *,
    role: str,
    user_id: uuid.UUID | None = None,
    email: str | None = None,
    reverts: Change | None = None,
) -> tuple[WorkspaceMember, bool]:
    """Add (or change the role of) a member; returns (row, created). The manage right is checked
    before the user is looked up, so a non-manager cannot probe which emails have accounts."""
    access_workspace(session, actor.principal, workspace_id, WsAction.MANAGE)
    uid = _resolve_user(session, actor.tenant_id, user_id, email)
    before = _current_role(session, workspace_id, uid)
    row = member_service.add_workspace_member(session, actor.principal, workspace_id, user_id=uid, role=role)
    if before != row.role:
        record_change(
            session,
            actor,
            op="workspace_member.add" if before is None else "workspace_member.update",
            object_type="workspace_member",
            object_id=member_key(workspace_id, uid),
            summary=f"{'added' if before is None else 'changed'} workspace member as {row.role}",
            scope={"workspace_id": workspace_id},
            before={"role": before, "user_id": uid},
            after={"role": row.role, "user_id": uid},
            reverts=reverts,
        )
    return row, before is None


def update_member(
    session: Session,
    actor: Actor,
    workspace_id: uuid.UUID,
    user_id: uuid.UUID,
    *,
    role: str,
    reverts: Change | None = None,
) -> WorkspaceMember:
    before = _current_role(session, workspace_id, user_id)
    row = member_service.change_workspace_member_role(
        session, actor.principal, workspace_id, user_id=user_id, role=role
    )
    if before != row.role:
        record_change(
            session,
            actor,
            op="workspace_member.update",
            object_type="workspace_member",
            object_id=member_key(workspace_id, user_id),
            summary=f"changed workspace member role {before} -> {row.role}",
            scope={"workspace_id": workspace_id},
            before={"role": before, "user_id": user_id},
            after={"role": row.role, "user_id": user_id},
            reverts=reverts,
        )
    return row


def remove_member(
    session: Session, actor: Actor, workspace_id: uuid.UUID, user_id: uuid.UUID, *, reverts: Change | None = None
) -> None:
    before = _current_role(session, workspace_id, user_id)
    member_service.remove_workspace_member(session, actor.principal, workspace_id, user_id=user_id)
    record_change(
        session,
        actor,
        op="workspace_member.remove",
        object_type="workspace_member",
        object_id=member_key(workspace_id, user_id),
        summary=f"removed workspace member ({before})",
        scope={"workspace_id": workspace_id},
        before={"role": before, "user_id": user_id},
        after={"role": None, "user_id": user_id},
        reverts=reverts,
    )
