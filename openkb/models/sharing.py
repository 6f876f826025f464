"""Collaborators, invitations (+ per-user acceptances of link invitations) and read-only share links."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from openkb.models._base import check_in, fk, id_field, text_array, ts
from openkb.models.enums import (
    COLLABORATOR_SOURCES,
    CONTENT_INVITE_ROLES,
    CONTENT_OBJECT_TYPES,
    CONTENT_ROLES,
    INVITATION_STATUSES,
    INVITE_OBJECT_TYPES,
    SUBJECT_TYPES,
    WORKSPACE_INVITE_ROLES,
)


def _vals(v: tuple[str, ...]) -> str:
    return ", ".join(f"'{x}'" for x in v)


class Collaborator(SQLModel, table=True):
    """Content roles on knowledge bases and documents only; workspace roles live in workspace_members."""

    __tablename__ = "collaborators"
    __table_args__ = (
        CheckConstraint(check_in("object_type", CONTENT_OBJECT_TYPES), name="collaborators_object_type_check"),
        CheckConstraint(check_in("subject_type", SUBJECT_TYPES), name="collaborators_subject_type_check"),
        CheckConstraint(check_in("role", CONTENT_ROLES), name="collaborators_role_check"),
        CheckConstraint(check_in("source", COLLABORATOR_SOURCES), name="collaborators_source_check"),
        UniqueConstraint(
            "object_type", "object_id", "subject_type", "subject_id", name="collaborators_object_subject_key"
        ),
        Index("ix_collaborators_subject", "subject_type", "subject_id"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    object_type: str
    object_id: uuid.UUID
    subject_type: str
    subject_id: uuid.UUID
    role: str
    source: str = Field(default="direct")
    created_by: uuid.UUID | None = fk("users.id", nullable=True, ondelete="SET NULL")
    created_at: datetime = ts()


class Invitation(SQLModel, table=True):
    __tablename__ = "invitations"
    __table_args__ = (
        CheckConstraint(check_in("object_type", INVITE_OBJECT_TYPES), name="invitations_object_type_check"),
        CheckConstraint(check_in("status", INVITATION_STATUSES), name="invitations_status_check"),
        CheckConstraint(
            f"(object_type = 'workspace' AND role IN ({_vals(WORKSPACE_INVITE_ROLES)})) OR "
            f"(object_type IN ('knowledge_base', 'document') AND role IN ({_vals(CONTENT_INVITE_ROLES)}))",
            name="invitations_role_by_object",
        ),
        CheckConstraint("max_uses IS NULL OR max_uses > 0", name="invitations_max_uses_check"),
        Index("ix_invitations_object", "object_type", "object_id"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    object_type: str
    object_id: uuid.UUID
    email: str | None = None
    invited_user_id: uuid.UUID | None = fk("users.id", nullable=True, ondelete="CASCADE")
    role: str
    token_hash: str = Field(unique=True)
    status: str = Field(default="pending")
    require_approval: bool = Field(default=False, sa_column_kwargs={"server_default": "false"})
    allowed_email_domains: list[str] | None = text_array(nullable=True)
    approved_by: uuid.UUID | None = fk("users.id", nullable=True, ondelete="SET NULL")
    invited_by: uuid.UUID = fk("users.id")
    expires_at: datetime | None = ts(nullable=True)
    max_uses: int | None = None
    used_count: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    created_at: datetime = ts()


class InvitationAcceptance(SQLModel, table=True):
    """One row per user who used a (possibly multi-use) invitation; holds approval state."""

    __tablename__ = "invitation_acceptances"
    __table_args__ = (
        CheckConstraint(
            "status IN ('awaiting_approval', 'accepted', 'rejected')", name="invitation_acceptances_status_check"
        ),
        UniqueConstraint("invitation_id", "user_id", name="invitation_acceptances_invitation_user_key"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    invitation_id: uuid.UUID = fk("invitations.id", ondelete="CASCADE")
    user_id: uuid.UUID = fk("users.id", ondelete="CASCADE")
    status: str
    decided_by: uuid.UUID | None = fk("users.id", nullable=True, ondelete="SET NULL")
    decided_at: datetime | None = ts(nullable=True)
    created_at: datetime = ts()


class ShareLink(SQLModel, table=True):
    """Read-only by construction: the CHECK refuses any permission but 'view'."""

    __tablename__ = "share_links"
    __table_args__ = (
        CheckConstraint(check_in("object_type", CONTENT_OBJECT_TYPES), name="share_links_object_type_check"),
        CheckConstraint("permission = 'view'", name="share_links_permission_check"),
        Index("ix_share_links_object", "object_type", "object_id"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    object_type: str
    object_id: uuid.UUID
    token_hash: str = Field(unique=True)
    permission: str = Field(default="view", sa_column_kwargs={"server_default": "view"})
    password_hash: str | None = None
    require_login: bool = Field(default=False, sa_column_kwargs={"server_default": "false"})
    restrict_to_workspace_members: bool = Field(default=False, sa_column_kwargs={"server_default": "false"})
    expires_at: datetime | None = ts(nullable=True)
    revoked_at: datetime | None = ts(nullable=True)
    created_by: uuid.UUID = fk("users.id")
    created_at: datetime = ts()
