"""Who can be picked as a collaborator of a knowledge base or document (the share panel's picker).

Only the object's managers may ask (the same ``manage`` check as ``add_collaborator``), and
they see no more than they already could: the members of the object's workspace, and only if
they may list that workspace's members (a guest may not, docs/permissions.md#roles), plus the
groups of the object's tenant (groups exist to be granted, docs/permissions.md#groups). Never a
user of another tenant or workspace, never a deleted account.

Trap: searching is a way of listing. A manager who is a guest of the workspace gets an empty
answer rather than a member list the members route would refuse them; the picker then has
nothing to offer, as the members route would.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, or_, select
from sqlmodel import Session

from openkb.errors import NotFound, PermissionDenied
from openkb.models import Group, User, WorkspaceMember
from openkb.permissions.guards import authorize, content_ref
from openkb.permissions.principal import Principal
from openkb.permissions.service import ObjectRef

MAX_CANDIDATES = 20


@dataclass(frozen=True)
class Candidate:
    subject_type: str  # "user" | "group"
    subject_id: uuid.UUID
    name: str
    email: str | None  # None for a group


def _like(query: str) -> str:
    """A case-insensitive substring pattern with LIKE's wildcards taken literally."""
    q = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{q}%"


def collaborator_candidates(
    session: Session, principal: Principal, obj: Any, query: str = "", *, limit: int = MAX_CANDIDATES
) -> list[Candidate]:
    """Users (the workspace's members) and groups (the tenant's) whose name or email contains
    ``query``, users first, each by name; at most ``limit`` of each."""
    ref = content_ref(obj)
    auth = authorize(session, principal, ref, "manage")
    try:
        authorize(session, principal, ObjectRef("workspace", auth.workspace_id), "list_members")
    except (PermissionDenied, NotFound):
        return []
    limit = max(1, min(limit, MAX_CANDIDATES))
    pattern = _like(query.strip()[:200])
    users = session.execute(
        select(User.id, User.display_name, User.email)
        .join(WorkspaceMember, WorkspaceMember.user_id == User.id)
        .where(
            WorkspaceMember.workspace_id == auth.workspace_id,
            User.status != "deleted",
            or_(User.display_name.ilike(pattern, escape="\\"), User.email.ilike(pattern, escape="\\")),
        )
        .order_by(func.lower(User.display_name), User.email)
        .limit(limit)
    ).all()
    groups = session.execute(
        select(Group.id, Group.name)
        .where(Group.tenant_id == auth.tenant_id, Group.name.ilike(pattern, escape="\\"))
        .order_by(func.lower(Group.name))
        .limit(limit)
    ).all()
    return [Candidate("user", uid, name, email) for uid, name, email in users] + [
        Candidate("group", gid, name, None) for gid, name in groups
    ]


__all__ = ["MAX_CANDIDATES", "Candidate", "collaborator_candidates"]
