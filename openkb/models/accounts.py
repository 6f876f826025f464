"""Users, tenants, memberships, registration settings, groups, sessions and one-time tokens."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from openkb.models._base import check_in, fk, id_field, text_array, ts
from openkb.models.enums import SIGNUP_STATUSES, TENANT_ROLES, USER_STATUSES


class User(SQLModel, table=True):
    __tablename__ = "users"
    __table_args__ = (
        CheckConstraint(check_in("status", USER_STATUSES), name="users_status_check"),
        Index("ix_users_created", "created_at", "id"),  # the console's users list order
    )

    id: uuid.UUID = id_field()
    email: str = Field(unique=True, index=False, max_length=320)
    password_hash: str | None = None
    display_name: str
    status: str
    email_verified_at: datetime | None = ts(nullable=True)
    created_at: datetime = ts()
    updated_at: datetime = ts()
    time_zone: str | None = None  # IANA name; NULL = UTC (the apps' quota day, docs/apps.md)


class Tenant(SQLModel, table=True):
    __tablename__ = "tenants"

    id: uuid.UUID = id_field()
    name: str
    slug: str = Field(unique=True)
    created_at: datetime = ts()
    time_zone: str | None = None  # IANA name for members without one; NULL = UTC (docs/apps.md)


class TenantMembership(SQLModel, table=True):
    __tablename__ = "tenant_memberships"
    __table_args__ = (
        CheckConstraint(check_in("role", TENANT_ROLES), name="tenant_memberships_role_check"),
        UniqueConstraint("tenant_id", "user_id", name="tenant_memberships_tenant_user_key"),
        Index("ix_tenant_memberships_user", "user_id"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    user_id: uuid.UUID = fk("users.id", ondelete="CASCADE")
    role: str
    created_at: datetime = ts()


class AuthSettings(SQLModel, table=True):
    """tenant_id NULL is the instance default; a tenant row overrides it (read tenant-first)."""

    __tablename__ = "auth_settings"
    __table_args__ = (
        CheckConstraint(
            check_in("default_signup_status", SIGNUP_STATUSES), name="auth_settings_default_signup_status_check"
        ),
        # NULLS NOT DISTINCT (PostgreSQL 15+) makes the single instance-default row unique too.
        UniqueConstraint("tenant_id", name="auth_settings_tenant_id_key", postgresql_nulls_not_distinct=True),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID | None = fk("tenants.id", nullable=True, ondelete="CASCADE")
    registration_enabled: bool = Field(default=True, sa_column_kwargs={"server_default": "true"})
    email_verification_required: bool = Field(default=True, sa_column_kwargs={"server_default": "true"})
    default_signup_status: str = Field(default="active", sa_column_kwargs={"server_default": "active"})
    invited_user_auto_active: bool = Field(default=True, sa_column_kwargs={"server_default": "true"})
    allowed_email_domains: list[str] | None = text_array(nullable=True)
    invite_required: bool = Field(default=False, sa_column_kwargs={"server_default": "false"})
    first_user_becomes_admin: bool = Field(default=True, sa_column_kwargs={"server_default": "true"})
    created_at: datetime = ts()
    updated_at: datetime = ts()


class Group(SQLModel, table=True):
    __tablename__ = "groups"
    __table_args__ = (UniqueConstraint("tenant_id", "name", name="groups_tenant_name_key"),)

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    name: str
    created_by: uuid.UUID = fk("users.id")
    created_at: datetime = ts()
    updated_at: datetime = ts()


class GroupMember(SQLModel, table=True):
    __tablename__ = "group_members"
    __table_args__ = (
        UniqueConstraint("group_id", "user_id", name="group_members_group_user_key"),
        Index("ix_group_members_user", "user_id"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    group_id: uuid.UUID = fk("groups.id", ondelete="CASCADE")
    user_id: uuid.UUID = fk("users.id", ondelete="CASCADE")
    created_at: datetime = ts()


class UserSession(SQLModel, table=True):
    """Server-side login sessions: logout and suspension take effect on the next request."""

    __tablename__ = "user_sessions"
    __table_args__ = (Index("ix_user_sessions_user", "user_id"),)

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    user_id: uuid.UUID = fk("users.id", ondelete="CASCADE")
    token_hash: str = Field(unique=True)
    csrf_token: str
    ip: str | None = None
    user_agent: str | None = None
    expires_at: datetime = ts()
    last_seen_at: datetime = ts()
    revoked_at: datetime | None = ts(nullable=True)
    created_at: datetime = ts()


class EmailToken(SQLModel, table=True):
    """One-time tokens mailed to users (email verification, password reset); hashes only."""

    __tablename__ = "email_tokens"
    __table_args__ = (
        CheckConstraint("purpose IN ('verify_email', 'password_reset')", name="email_tokens_purpose_check"),
        Index("ix_email_tokens_user", "user_id"),
    )

    id: uuid.UUID = id_field()
    user_id: uuid.UUID = fk("users.id", ondelete="CASCADE")
    purpose: str
    token_hash: str = Field(unique=True)
    expires_at: datetime = ts()
    used_at: datetime | None = ts(nullable=True)
    created_at: datetime = ts()


class RateLimitBucket(SQLModel, table=True):
    """Fixed-window counters in PostgreSQL so every replica shares the same limits."""

    __tablename__ = "rate_limit_buckets"

    key: str = Field(primary_key=True)
    window_start: datetime = ts()
    count: int = Field(default=0)
