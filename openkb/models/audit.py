"""Audit log (docs/data-model.md#audit-and-change-log) and the change log every write records (revertable by run id)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, Index, text
from sqlmodel import SQLModel

from openkb.models._base import check_in, fk, id_field, jsonb, ts
from openkb.models.enums import AUDIT_ACTOR_TYPES, CHANGE_STATUSES


class AuditLog(SQLModel, table=True):
    __tablename__ = "audit_logs"
    __table_args__ = (
        CheckConstraint(check_in("actor_type", AUDIT_ACTOR_TYPES), name="audit_logs_actor_type_check"),
        Index("ix_audit_logs_tenant_created", "tenant_id", "created_at"),
        Index("ix_audit_logs_object", "object_type", "object_id"),
        # the console's audit filters (actor, action) on 100k+ rows (bench/admin.py)
        Index("ix_audit_logs_actor_created", "actor_user_id", "created_at"),
        Index("ix_audit_logs_tenant_action_created", "tenant_id", "action", "created_at"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID | None = fk("tenants.id", nullable=True, ondelete="CASCADE")
    actor_user_id: uuid.UUID | None = None
    actor_type: str
    action: str
    object_type: str | None = None
    object_id: uuid.UUID | None = None
    meta: dict[str, Any] = jsonb("metadata")
    ip: str | None = None
    user_agent: str | None = None
    created_at: datetime = ts()


class Change(SQLModel, table=True):
    """One row per write; ``run_id`` groups the writes of one request/import so they revert together."""

    __tablename__ = "changes"
    __table_args__ = (
        CheckConstraint(check_in("actor_type", AUDIT_ACTOR_TYPES), name="changes_actor_type_check"),
        CheckConstraint(check_in("status", CHANGE_STATUSES), name="changes_status_check"),
        Index("ix_changes_run", "run_id"),
        Index("ix_changes_tenant_created", "tenant_id", "created_at"),
        Index("ix_changes_object", "object_type", "object_id"),
        # only apps' writes: a person's or a job's (most writes) has no installation, and an entry
        # per NULL row grew the index with every save for no query (migration 0013); a query
        # ``app_installation_id = :id`` implies NOT NULL, so the planner still uses it
        Index(
            "ix_changes_app_installation",
            "app_installation_id",
            "created_at",
            postgresql_where=text("app_installation_id IS NOT NULL"),
        ),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    run_id: uuid.UUID
    actor_type: str
    actor_id: uuid.UUID | None = None
    op: str
    object_type: str
    object_id: uuid.UUID
    summary: str
    before_version_id: uuid.UUID | None = None
    after_version_id: uuid.UUID | None = None
    before_state: dict[str, Any] = jsonb("before_state")
    after_state: dict[str, Any] = jsonb("after_state")
    status: str = "applied"
    reverted_by_change_id: uuid.UUID | None = None
    # the app installation that wrote it (docs/apps.md#changes); NULL for people and jobs
    app_installation_id: uuid.UUID | None = fk("app_installations.id", nullable=True, ondelete="SET NULL")
    created_at: datetime = ts()
