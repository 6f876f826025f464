"""Delete a user (docs/accounts.md#deleting-a-user): a soft delete that anonymizes the account.

The row stays (documents, versions, change runs and audit rows point at it by id), with status
``deleted``, its email replaced by ``deleted-<id>@deleted.invalid`` (the address is free for a
new account) and its name by "Deleted user"; the password is dropped. Everything that lets the
person act goes in the same transaction: sessions revoked, personal access tokens revoked, OAuth
grants revoked (with their tokens), workspace/group/collaborator memberships removed, pending
requests to join rejected and invitations addressed to them revoked (an approval or a use would
bring the account back), pending email links deleted, admin roles dropped to ``member``. What they wrote stays with the knowledge
base it was written in.

Traps:

* Ownership never disappears with a person. A user who owns workspaces or knowledge bases /
  documents is refused (409 CONFLICT, ``reason: owns_content`` with counts) unless the
  administrator names a ``successor``, an active user of the same tenant who takes over every
  owned object. The administrator sees counts only, never what the objects are
  (docs/permissions.md#administrators).
* The last active system_admin cannot be deleted (nobody could administer the instance), and
  nobody deletes themselves here.
* A tenant_admin deletes only users who belong to their tenant alone; a user with memberships in
  other tenants is a system_admin's decision.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from sqlalchemy import delete, func, update
from sqlmodel import Session, col, select

from openkb.accounts.admin import access_user
from openkb.accounts.sessions import revoke_user_sessions
from openkb.accounts.users import access_admin
from openkb.audit import record_audit
from openkb.errors import Conflict, PermissionDenied, ValidationError
from openkb.models import (
    AppCredential,
    AppInstallation,
    Collaborator,
    EmailToken,
    GroupMember,
    Invitation,
    InvitationAcceptance,
    McpOAuthGrant,
    McpPersonalAccessToken,
    TenantMembership,
    User,
    WorkspaceMember,
)
from openkb.models._base import utcnow
from openkb.oauth.grants import do_revoke_grant
from openkb.permissions.principal import Principal

DELETED_NAME = "Deleted user"


def anonymous_email(user_id: uuid.UUID) -> str:
    return f"deleted-{user_id.hex}@deleted.invalid"


@dataclass
class Deleted:
    user: User
    counts: dict[str, int] = field(default_factory=dict)


def _owned(session: Session, user_id: uuid.UUID) -> tuple[list[WorkspaceMember], list[Collaborator]]:
    ws = list(
        session.exec(
            select(WorkspaceMember).where(WorkspaceMember.user_id == user_id, WorkspaceMember.role == "owner")
        ).all()
    )
    objs = list(
        session.exec(
            select(Collaborator).where(
                Collaborator.subject_type == "user", Collaborator.subject_id == user_id, Collaborator.role == "owner"
            )
        ).all()
    )
    return ws, objs


def _successor(session: Session, successor_id: uuid.UUID, tenants: set[uuid.UUID]) -> User:
    user = session.get(User, successor_id)
    if user is None or user.status != "active":
        raise ValidationError("the successor must be an active user", field="successor_id")
    theirs = set(session.exec(select(TenantMembership.tenant_id).where(TenantMembership.user_id == successor_id)).all())
    if not tenants <= theirs:
        raise ValidationError("the successor must belong to the tenant of every owned object", field="successor_id")
    return user


def _hand_over(
    session: Session, user_id: uuid.UUID, heir: uuid.UUID, ws: list[WorkspaceMember], objs: list[Collaborator]
) -> None:
    """The successor becomes owner of each object; the leaving owner's row goes (below)."""
    for row in ws:
        theirs = session.exec(
            select(WorkspaceMember).where(
                WorkspaceMember.workspace_id == row.workspace_id, WorkspaceMember.user_id == heir
            )
        ).first()
        if theirs is None:
            session.add(
                WorkspaceMember(tenant_id=row.tenant_id, workspace_id=row.workspace_id, user_id=heir, role="owner")
            )
        else:
            theirs.role = "owner"
            session.add(theirs)
    for row in objs:
        theirs = session.exec(
            select(Collaborator).where(
                Collaborator.object_type == row.object_type,
                Collaborator.object_id == row.object_id,
                Collaborator.subject_type == "user",
                Collaborator.subject_id == heir,
            )
        ).first()
        if theirs is None:
            session.add(
                Collaborator(
                    tenant_id=row.tenant_id,
                    object_type=row.object_type,
                    object_id=row.object_id,
                    subject_type="user",
                    subject_id=heir,
                    role="owner",
                    source=row.source,
                    created_by=heir,
                )
            )
        else:
            theirs.role = "owner"
            session.add(theirs)
    session.flush()


def delete_user(
    session: Session, principal: Principal, user_id: uuid.UUID, *, successor_id: uuid.UUID | None = None
) -> Deleted:
    scope = access_admin(session, principal)
    user, audit_tenant = access_user(session, scope, user_id, lock=True)
    if user.id == scope.user_id:
        raise PermissionDenied("administrators cannot delete themselves")
    memberships = list(session.exec(select(TenantMembership).where(TenantMembership.user_id == user.id)).all())
    if any(m.role == "system_admin" for m in memberships):
        if not scope.is_system_admin:
            raise PermissionDenied("only a system_admin can delete a system_admin")
        others = session.exec(
            select(func.count())
            .select_from(TenantMembership)
            .join(User, col(User.id) == TenantMembership.user_id)
            .where(
                TenantMembership.role == "system_admin", TenantMembership.user_id != user.id, User.status == "active"
            )
        ).one()
        if not others:
            raise Conflict("the last system administrator cannot be deleted", reason="last_system_admin")
    if not scope.is_system_admin and any(m.tenant_id != scope.tenant_id for m in memberships):
        raise PermissionDenied("this user belongs to other tenants too: a system_admin deletes them")
    if user.status == "deleted":
        return Deleted(user)  # idempotent: nothing left to take away, nothing audited
    if successor_id is not None and successor_id == user.id:
        raise ValidationError("the successor is the user being deleted", field="successor_id")

    ws, objs = _owned(session, user.id)
    heir: User | None = None
    if ws or objs:
        if successor_id is None:
            raise Conflict(
                "this user owns workspaces or knowledge bases: name a successor who takes them over",
                reason="owns_content",
                workspaces=len(ws),
                objects=len(objs),
            )
        heir = _successor(session, successor_id, {r.tenant_id for r in ws} | {r.tenant_id for r in objs})
        _hand_over(session, user.id, heir.id, ws, objs)

    now = utcnow()
    before = {"status": user.status, "email": user.email, "display_name": user.display_name}
    counts = {"workspaces_handed_over": len(ws), "objects_handed_over": len(objs)}
    counts["sessions_revoked"] = revoke_user_sessions(session, user.id)
    res = session.execute(
        update(McpPersonalAccessToken)
        .where(col(McpPersonalAccessToken.user_id) == user.id, col(McpPersonalAccessToken.status) == "active")
        .values(status="revoked", revoked_at=now)
    )
    counts["tokens_revoked"] = int(res.rowcount or 0)  # type: ignore[attr-defined]
    grants = session.exec(
        select(McpOAuthGrant).where(McpOAuthGrant.user_id == user.id, McpOAuthGrant.status == "active")
    ).all()
    for g in grants:
        do_revoke_grant(session, principal, g, by="admin")
    counts["oauth_grants_revoked"] = len(grants)
    # Apps act as their user (docs/apps.md): their credentials die with the account, and the
    # installations end as "keep" uninstalls (what the apps wrote stays, like the user's own work).
    installs = select(AppInstallation.id).where(
        col(AppInstallation.user_id) == user.id, col(AppInstallation.status) == "active"
    )
    session.execute(
        update(AppCredential)
        .where(col(AppCredential.installation_id).in_(installs), col(AppCredential.status) == "active")
        .values(status="revoked", revoked_at=now)
    )
    res = session.execute(
        update(AppInstallation)
        .where(col(AppInstallation.user_id) == user.id, col(AppInstallation.status) == "active")
        .values(status="uninstalled", uninstalled_at=now, uninstall_mode="keep")
    )
    counts["app_installations_ended"] = int(res.rowcount or 0)  # type: ignore[attr-defined]
    res = session.execute(delete(WorkspaceMember).where(col(WorkspaceMember.user_id) == user.id))
    counts["workspace_memberships_removed"] = int(res.rowcount or 0)  # type: ignore[attr-defined]
    res = session.execute(delete(GroupMember).where(col(GroupMember.user_id) == user.id))
    counts["group_memberships_removed"] = int(res.rowcount or 0)  # type: ignore[attr-defined]
    res = session.execute(
        delete(Collaborator).where(col(Collaborator.subject_type) == "user", col(Collaborator.subject_id) == user.id)
    )
    counts["collaborations_removed"] = int(res.rowcount or 0)  # type: ignore[attr-defined]
    # A pending request to join, or an invitation addressed to them, would bring the account back
    # as a member once someone approves or uses it: close both (docs/accounts.md#deleting-a-user).
    res = session.execute(
        update(InvitationAcceptance)
        .where(col(InvitationAcceptance.user_id) == user.id, col(InvitationAcceptance.status) == "awaiting_approval")
        .values(status="rejected", decided_by=principal.user_id, decided_at=now)
    )
    counts["invitation_requests_rejected"] = int(res.rowcount or 0)  # type: ignore[attr-defined]
    res = session.execute(
        update(Invitation)
        .where(
            col(Invitation.status) == "pending",
            (col(Invitation.invited_user_id) == user.id) | (func.lower(col(Invitation.email)) == user.email.lower()),
        )
        .values(status="revoked")
    )
    counts["invitations_revoked"] = int(res.rowcount or 0)  # type: ignore[attr-defined]
    session.execute(delete(EmailToken).where(col(EmailToken.user_id) == user.id))
    session.execute(
        update(TenantMembership)
        .where(col(TenantMembership.user_id) == user.id, col(TenantMembership.role) != "member")
        .values(role="member")
    )

    user.status = "deleted"
    user.email = anonymous_email(user.id)
    user.display_name = DELETED_NAME
    user.password_hash = None
    user.updated_at = now
    session.add(user)
    session.flush()
    record_audit(
        session,
        tenant_id=audit_tenant,
        actor=principal,
        action="user.deleted",
        object_type="user",
        object_id=user.id,
        metadata={
            "before": before,
            "after": {"status": "deleted"},
            "email": before["email"],
            **({"successor_id": str(heir.id), "successor_email": heir.email} if heir else {}),
            **counts,
        },
    )
    return Deleted(user, counts)


__all__ = ["DELETED_NAME", "Deleted", "anonymous_email", "delete_user"]
