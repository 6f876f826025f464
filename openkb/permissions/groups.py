"""User groups (docs/permissions.md#groups): named sets of one tenant's users that can be granted
content roles as collaborators (``subject_type = 'group'``).

Who may change them: the group's tenant's tenant_admin, or a system_admin (of any tenant: they
administer every tenant), acting in that tenant (a PAT also needs the ``admin`` scope). Anyone
else signed in gets PermissionDenied; a group of another tenant is NotFound, as if it did not
exist. The system principal (the ``openkb group`` CLI, run by whoever operates the appliance) may
act on any tenant it names. Managing a group grants no content access by itself
(docs/permissions.md#administrators).

Never across tenants: a member must belong to the group's tenant (``tenant_memberships``), the
same rule ``collaborators.check_subject`` applies to grants.

Every change is audited with before/after in the same transaction. Deleting a group also deletes
its collaborator rows (``collaborators.subject_id`` has no foreign key to ``groups``, so nothing
else would), each audited as ``collaborator.remove``.

Trap: no re-index. Chunks carry object tokens (``kb:<id>:viewer``, ...), never people or groups
(see the package README, "Search forms"), so, exactly as ``collaborators.remove_collaborator``,
nothing is enqueued when a grant or a membership goes away: the next permission decision reads
PostgreSQL and the change is in effect at once.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from openkb.audit import record_audit
from openkb.config import get_settings
from openkb.errors import AlreadyExists, NotFound, PermissionDenied, Unauthenticated, ValidationError
from openkb.models import Collaborator, Group, GroupMember, Tenant, TenantMembership, User
from openkb.models._base import utcnow
from openkb.permissions.principal import Principal

ADMIN_ROLES = ("tenant_admin", "system_admin")
ADMIN_SCOPE = "admin"


def _admin_tenant(session: Session, principal: Principal, tenant_id: uuid.UUID | None = None) -> uuid.UUID:
    """The tenant whose groups the principal administers, or raise."""
    if principal.kind == "system":
        if tenant_id is None:
            raise ValidationError("name the tenant whose groups to manage", field="tenant_id")
        if session.get(Tenant, tenant_id) is None:
            raise NotFound("tenant not found")
        return tenant_id
    if principal.kind != "user" or principal.user_id is None or principal.tenant_id is None:
        raise Unauthenticated("sign in as an administrator")
    if tenant_id is not None and tenant_id != principal.tenant_id:
        raise NotFound("tenant not found")
    # the same test as every admin route (a system_admin administers any tenant, acting in the one
    # they are signed into: docs/permissions.md#administrators)
    from openkb.accounts.users import access_admin

    try:
        access_admin(session, principal)
    except PermissionDenied:
        raise PermissionDenied("tenant administrators only") from None
    if principal.scopes is not None and ADMIN_SCOPE not in principal.scopes:
        raise PermissionDenied("this token lacks the admin scope")
    return principal.tenant_id


def access_group(session: Session, principal: Principal, group_id: uuid.UUID) -> Group:
    """Fetch + authorize. A group outside the caller's tenant is NotFound (never PermissionDenied)."""
    group = session.get(Group, group_id)
    if principal.kind != "system":
        tid = _admin_tenant(session, principal)  # 401/403 first: these routes are not secret
        if group is None or group.tenant_id != tid:
            raise NotFound("group not found")
        return group
    if group is None:
        raise NotFound("group not found")
    return group


def find_group(session: Session, principal: Principal, name_or_id: str, *, tenant_id: uuid.UUID | None = None) -> Group:
    """By name or id, within the tenant the principal administers (the CLI's way of naming one)."""
    tid = _admin_tenant(session, principal, tenant_id)
    match = Group.name == name_or_id.strip()
    try:
        match = match | (Group.id == uuid.UUID(name_or_id))  # type: ignore[assignment]
    except ValueError:
        pass
    group = session.execute(select(Group).where(Group.tenant_id == tid, match)).scalars().first()
    if group is None:
        raise NotFound(f"no group {name_or_id!r}")
    return group


def _clean_name(name: str) -> str:
    if not isinstance(name, str) or "\x00" in name:
        raise ValidationError("group name must be text without NUL characters", field="name")
    n = name.strip()
    limit = get_settings().max_name_chars
    if not n or len(n) > limit:
        raise ValidationError(f"group name must be 1-{limit} characters", field="name")
    return n


def _name_taken(session: Session, tenant_id: uuid.UUID, name: str, *, other_than: uuid.UUID | None = None) -> bool:
    q = select(Group.id).where(Group.tenant_id == tenant_id, Group.name == name)
    if other_than is not None:
        q = q.where(Group.id != other_than)
    return session.execute(q).first() is not None


def _flush_unique(session: Session, name: str) -> None:
    """Flush in a savepoint so a concurrent duplicate is 409, not a broken transaction (500)."""
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError:
        raise AlreadyExists(f"a group named {name!r} already exists") from None


def _audit(
    session: Session,
    principal: Principal,
    action: str,
    group: Group,
    *,
    ip: str | None,
    user_agent: str | None,
    **meta: Any,
) -> None:
    record_audit(
        session,
        tenant_id=group.tenant_id,
        actor=principal,
        action=action,
        object_type="group",
        object_id=group.id,
        ip=ip,
        user_agent=user_agent,
        metadata=meta,
    )


def member_counts(session: Session, group_ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
    if not group_ids:
        return {}
    rows = session.execute(
        select(GroupMember.group_id, func.count())
        .where(GroupMember.group_id.in_(group_ids))
        .group_by(GroupMember.group_id)
    ).all()  # type: ignore[attr-defined]
    return {gid: int(n) for gid, n in rows}


def list_groups(session: Session, principal: Principal, *, tenant_id: uuid.UUID | None = None) -> list[Group]:
    tid = _admin_tenant(session, principal, tenant_id)
    return list(session.execute(select(Group).where(Group.tenant_id == tid).order_by(Group.name, Group.id)).scalars())


def create_group(
    session: Session,
    principal: Principal,
    *,
    name: str,
    tenant_id: uuid.UUID | None = None,
    ip: str | None = None,
    user_agent: str | None = None,
) -> Group:
    tid = _admin_tenant(session, principal, tenant_id)
    clean = _clean_name(name)
    if _name_taken(session, tid, clean):
        raise AlreadyExists(f"a group named {clean!r} already exists")
    creator = principal.user_id
    if creator is None:  # the CLI operator: groups.created_by is NOT NULL, so a tenant admin signs it
        creator = (
            session.execute(
                select(TenantMembership.user_id)
                .where(
                    TenantMembership.tenant_id == tid,
                    TenantMembership.role.in_(ADMIN_ROLES),  # type: ignore[attr-defined]
                )
                .order_by(TenantMembership.created_at)
            )
            .scalars()
            .first()
        )
        if creator is None:
            raise ValidationError("the tenant has no administrator to own the group; create one first")
    group = Group(tenant_id=tid, name=clean, created_by=creator)
    session.add(group)
    _flush_unique(session, clean)
    _audit(session, principal, "group.create", group, ip=ip, user_agent=user_agent, before=None, after={"name": clean})
    return group


def rename_group(
    session: Session,
    principal: Principal,
    group_id: uuid.UUID,
    *,
    name: str,
    ip: str | None = None,
    user_agent: str | None = None,
) -> Group:
    group = access_group(session, principal, group_id)
    clean = _clean_name(name)
    before = group.name
    if clean == before:
        return group
    if _name_taken(session, group.tenant_id, clean, other_than=group.id):
        raise AlreadyExists(f"a group named {clean!r} already exists")
    group.name = clean
    group.updated_at = utcnow()
    session.add(group)
    _flush_unique(session, clean)
    _audit(
        session,
        principal,
        "group.rename",
        group,
        ip=ip,
        user_agent=user_agent,
        before={"name": before},
        after={"name": clean},
    )
    return group


def delete_group(
    session: Session, principal: Principal, group_id: uuid.UUID, *, ip: str | None = None, user_agent: str | None = None
) -> None:
    """Delete the group, its memberships and every collaborator grant it holds, in this transaction."""
    group = access_group(session, principal, group_id)
    grants = list(
        session.execute(
            select(Collaborator)
            .where(
                Collaborator.subject_type == "group",
                Collaborator.subject_id == group.id,
            )
            .order_by(Collaborator.created_at)
        ).scalars()
    )
    members = list(session.execute(select(GroupMember.user_id).where(GroupMember.group_id == group.id)).scalars())
    for c in grants:
        record_audit(
            session,
            tenant_id=c.tenant_id,
            actor=principal,
            action="collaborator.remove",
            object_type=c.object_type,
            object_id=c.object_id,
            ip=ip,
            user_agent=user_agent,
            metadata={
                "collaborator_id": c.id,
                "subject_type": "group",
                "subject_id": group.id,
                "reason": "group.delete",
                "before": {"role": c.role},
                "after": {"role": None},
            },
        )
        session.delete(c)
    _audit(
        session,
        principal,
        "group.delete",
        group,
        ip=ip,
        user_agent=user_agent,
        before={
            "name": group.name,
            "members": members,
            "grants": [{"object_type": c.object_type, "object_id": c.object_id, "role": c.role} for c in grants],
        },
        after=None,
    )
    session.flush()
    session.delete(group)  # group_members go with it (ON DELETE CASCADE)
    session.flush()


def list_members(session: Session, principal: Principal, group_id: uuid.UUID) -> list[tuple[GroupMember, User]]:
    group = access_group(session, principal, group_id)
    rows = session.execute(
        select(GroupMember, User)
        .join(User, User.id == GroupMember.user_id)
        .where(GroupMember.group_id == group.id)
        .order_by(GroupMember.created_at, User.email)
    ).all()
    return [(m, u) for m, u in rows]


def _tenant_user(
    session: Session, tenant_id: uuid.UUID, *, user_id: uuid.UUID | None = None, email: str | None = None
) -> User:
    """A (not deleted) user of ``tenant_id``, by id or email; anyone else is NotFound."""
    if (user_id is None) == (email is None):
        raise ValidationError("give user_id or email", field="user_id")
    q = (
        select(User)
        .join(TenantMembership, TenantMembership.user_id == User.id)
        .where(TenantMembership.tenant_id == tenant_id, User.status != "deleted")
    )
    q = q.where(User.id == user_id) if user_id is not None else q.where(User.email == (email or "").strip().lower())
    user = session.execute(q).scalar_one_or_none()
    if user is None:
        raise NotFound("user not found")
    return user


def add_member(
    session: Session,
    principal: Principal,
    group_id: uuid.UUID,
    *,
    user_id: uuid.UUID | None = None,
    email: str | None = None,
    ip: str | None = None,
    user_agent: str | None = None,
) -> tuple[GroupMember, User, bool]:
    """Returns (membership, user, created). Adding an existing member changes nothing and audits nothing."""
    group = access_group(session, principal, group_id)
    user = _tenant_user(session, group.tenant_id, user_id=user_id, email=email)
    row = session.execute(
        select(GroupMember).where(GroupMember.group_id == group.id, GroupMember.user_id == user.id)
    ).scalar_one_or_none()
    if row is not None:
        return row, user, False
    row = GroupMember(tenant_id=group.tenant_id, group_id=group.id, user_id=user.id)
    session.add(row)
    session.flush()
    _audit(
        session,
        principal,
        "group_member.add",
        group,
        ip=ip,
        user_agent=user_agent,
        user_id=user.id,
        before={"member": False},
        after={"member": True},
    )
    return row, user, True


def remove_member(
    session: Session,
    principal: Principal,
    group_id: uuid.UUID,
    *,
    user_id: uuid.UUID | None = None,
    email: str | None = None,
    ip: str | None = None,
    user_agent: str | None = None,
) -> None:
    group = access_group(session, principal, group_id)
    if email is not None and user_id is None:
        user_id = _tenant_user(session, group.tenant_id, email=email).id
    row = session.execute(
        select(GroupMember).where(GroupMember.group_id == group.id, GroupMember.user_id == user_id)
    ).scalar_one_or_none()
    if row is None:
        raise NotFound("member not found")
    _audit(
        session,
        principal,
        "group_member.remove",
        group,
        ip=ip,
        user_agent=user_agent,
        user_id=user_id,
        before={"member": True},
        after={"member": False},
    )
    session.delete(row)
    session.flush()
