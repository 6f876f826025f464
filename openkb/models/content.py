"""Workspaces, knowledge bases, the document tree (folders are documents.type = 'folder') and versions."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PGUUID
from sqlmodel import Field, SQLModel

from openkb.models._base import check_in, fk, id_field, jsonb, text_array, ts
from openkb.models.enums import (
    DOC_STATUSES,
    DOC_TYPES,
    INDEX_STATUSES,
    KB_STATUSES,
    PERMISSION_MODES,
    VERSION_SOURCES,
    VISIBILITIES,
    WORKSPACE_ROLES,
)


class Workspace(SQLModel, table=True):
    __tablename__ = "workspaces"
    __table_args__ = (UniqueConstraint("tenant_id", "slug", name="workspaces_tenant_slug_key"),)

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    name: str
    slug: str
    description: str | None = None
    created_by: uuid.UUID = fk("users.id")
    created_at: datetime = ts()
    updated_at: datetime = ts()


class WorkspaceMember(SQLModel, table=True):
    __tablename__ = "workspace_members"
    __table_args__ = (
        CheckConstraint(check_in("role", WORKSPACE_ROLES), name="workspace_members_role_check"),
        UniqueConstraint("workspace_id", "user_id", name="workspace_members_workspace_user_key"),
        Index("ix_workspace_members_user", "user_id"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    workspace_id: uuid.UUID = fk("workspaces.id", ondelete="CASCADE")
    user_id: uuid.UUID = fk("users.id", ondelete="CASCADE")
    role: str
    created_at: datetime = ts()


class KnowledgeBase(SQLModel, table=True):
    """``settings`` holds the two configurable capability cells of docs/permissions.md#capability-matrix
    (``editor_can_delete``, ``editor_can_create_share_links``, both default false) — never models."""

    __tablename__ = "knowledge_bases"
    __table_args__ = (
        CheckConstraint(check_in("visibility", VISIBILITIES), name="knowledge_bases_visibility_check"),
        CheckConstraint(check_in("status", KB_STATUSES), name="knowledge_bases_status_check"),
        UniqueConstraint("workspace_id", "slug", name="knowledge_bases_workspace_slug_key"),
        Index("ix_knowledge_bases_tenant", "tenant_id"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    workspace_id: uuid.UUID = fk("workspaces.id", ondelete="CASCADE")
    title: str
    slug: str
    description: str | None = None
    visibility: str
    status: str = Field(default="active")
    settings: dict[str, Any] = jsonb("settings")
    created_by: uuid.UUID = fk("users.id")
    created_at: datetime = ts()
    updated_at: datetime = ts()


class Document(SQLModel, table=True):
    __tablename__ = "documents"
    __table_args__ = (
        CheckConstraint(check_in("type", DOC_TYPES), name="documents_type_check"),
        CheckConstraint(check_in("status", DOC_STATUSES), name="documents_status_check"),
        CheckConstraint(check_in("permission_mode", PERMISSION_MODES), name="documents_permission_mode_check"),
        CheckConstraint(check_in("visibility", VISIBILITIES, nullable=True), name="documents_visibility_check"),
        CheckConstraint(check_in("index_status", INDEX_STATUSES), name="documents_index_status_check"),
        CheckConstraint(
            check_in("index_failure", ("transient", "permanent"), nullable=True), name="documents_index_failure_check"
        ),
        CheckConstraint("parent_id IS NULL OR parent_id <> id", name="documents_parent_not_self_check"),
        # Postgres UNIQUE lets many NULL keys coexist: only keyed documents are constrained.
        UniqueConstraint("knowledge_base_id", "external_key", name="documents_kb_external_key_key"),
        Index("ix_documents_kb_parent", "knowledge_base_id", "parent_id", "sort_order"),
        Index("ix_documents_tenant_updated", "tenant_id", "updated_at"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    workspace_id: uuid.UUID = fk("workspaces.id", ondelete="CASCADE")
    knowledge_base_id: uuid.UUID = fk("knowledge_bases.id", ondelete="CASCADE")
    parent_id: uuid.UUID | None = fk("documents.id", nullable=True, ondelete="CASCADE")
    type: str
    title: str
    slug: str
    status: str
    permission_mode: str = Field(default="inherit", sa_column_kwargs={"server_default": "inherit"})
    visibility: str | None = None
    # documents <-> document_versions reference each other: this FK is added after both tables.
    current_version_id: uuid.UUID | None = Field(
        default=None,
        sa_column=Column(
            PGUUID(as_uuid=True),
            ForeignKey(
                "document_versions.id", ondelete="SET NULL", use_alter=True, name="documents_current_version_id_fkey"
            ),
            nullable=True,
        ),
    )
    sort_order: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    external_key: str | None = None
    meta: dict[str, Any] = jsonb("metadata")
    tags: list[str] = text_array()
    index_status: str = Field(default="pending", sa_column_kwargs={"server_default": "pending"})
    index_error: str | None = None
    # Failed index runs since the last successful one (a success resets it to 0). ``index_status``
    # stays ``pending`` while the worker will retry and is ``failed`` once it gives up
    # (docs/operations.md#index-operations).
    index_attempts: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    indexed_version_id: uuid.UUID | None = None
    # Why the last index run failed: "transient" (an outage: stays pending, retried until it
    # passes) or "permanent" (Milvus refuses the data: failed at once); NULL after a success.
    # ``index_checked_at``: when a run last recorded an outcome (the reconciler's clock).
    index_failure: str | None = None
    index_checked_at: datetime | None = ts(nullable=True)
    deleted_at: datetime | None = ts(nullable=True)
    created_by: uuid.UUID = fk("users.id")
    updated_by: uuid.UUID = fk("users.id")
    created_at: datetime = ts()
    updated_at: datetime = ts()


class DocumentVersion(SQLModel, table=True):
    __tablename__ = "document_versions"
    __table_args__ = (
        CheckConstraint(check_in("source_type", VERSION_SOURCES), name="document_versions_source_type_check"),
        UniqueConstraint("document_id", "version_no", name="document_versions_document_version_no_key"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    document_id: uuid.UUID = fk("documents.id", ondelete="CASCADE")
    version_no: int
    title: str = Field(default="")
    markdown: str
    markdown_hash: str
    source_type: str
    source_file_id: uuid.UUID | None = None
    created_by: uuid.UUID = fk("users.id")
    created_at: datetime = ts()


class DocumentExportForm(SQLModel, table=True):
    """What an export needs of a version's body, computed once when the version is written
    (versions never change): its internal references and its deflated pieces
    (``openkb/exporting/forms.py``, docs/export.md#speed), and the body itself, so an export
    reads this row alone (migration 0014). A version without one still exports (the form is then
    computed on the fly, with the same bytes)."""

    __tablename__ = "document_export_forms"

    version_id: uuid.UUID = Field(
        sa_column=Column(PGUUID(as_uuid=True), ForeignKey("document_versions.id", ondelete="CASCADE"), primary_key=True)
    )
    form: int = Field(sa_column=Column(SmallInteger, nullable=False))
    refs: list[int] = Field(sa_column=Column(ARRAY(Integer), nullable=False))
    keys: list[str] = Field(sa_column=Column(ARRAY(Text), nullable=False))
    blocks: list[int] = Field(sa_column=Column(ARRAY(Integer), nullable=False))
    deflated: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    body: bytes = Field(sa_column=Column(LargeBinary, nullable=False))  # the version's Markdown, UTF-8
