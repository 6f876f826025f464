"""Assets, imports, chunks (the PostgreSQL truth Milvus copies), index profiles and rebuild jobs."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, CheckConstraint, Column, ForeignKey, Index, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from openkb.models._base import check_in, fk, id_field, jsonb, text_array, ts
from openkb.models.enums import (
    ALIAS_SWITCH_KINDS,
    IMPORT_STATUSES,
    PROFILE_STATUSES,
    REBUILD_STATUSES,
    VERIFY_STATUSES,
)


class DocumentAsset(SQLModel, table=True):
    __tablename__ = "document_assets"
    __table_args__ = (
        CheckConstraint("size_bytes >= 0", name="document_assets_size_check"),
        Index("ix_document_assets_document", "document_id"),
        Index("ix_document_assets_content", "tenant_id", "sha256"),  # an upload finds its bytes' blob
        Index("ix_document_assets_object_key", "object_key"),  # a delete finds the blob's other rows
        # the prune walks the detached rows by id (openkb.assets.prune_detached): only they are in it
        Index("ix_document_assets_detached", "id", postgresql_where=text("document_id IS NULL")),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    document_id: uuid.UUID | None = fk("documents.id", nullable=True, ondelete="SET NULL")
    object_key: str
    filename: str | None = None
    mime_type: str
    size_bytes: int = Field(sa_column=Column(BigInteger, nullable=False))
    sha256: str | None = None
    created_by: uuid.UUID = fk("users.id")
    created_at: datetime = ts()
    # since when the row has had no document (page purged, import source, never attached): pruned
    # after ASSET_RETENTION_DAYS (docs/data-model.md#assets); NULL while attached
    detached_at: datetime | None = ts(nullable=True)


class ImportJob(SQLModel, table=True):
    __tablename__ = "import_jobs"
    __table_args__ = (CheckConstraint(check_in("status", IMPORT_STATUSES), name="import_jobs_status_check"),)

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    workspace_id: uuid.UUID = fk("workspaces.id", ondelete="CASCADE")
    knowledge_base_id: uuid.UUID = fk("knowledge_bases.id", ondelete="CASCADE")
    source_asset_id: uuid.UUID | None = fk(
        "document_assets.id", nullable=True, ondelete="SET NULL"
    )  # pruned after the job
    status: str
    converter: str
    error: str | None = None
    warnings: list[str] = text_array()
    document_id: uuid.UUID | None = fk("documents.id", nullable=True, ondelete="SET NULL")
    target_id: uuid.UUID | None = fk("documents.id", nullable=True, ondelete="SET NULL")  # folder imported into
    run_id: uuid.UUID | None = None  # the change-log run of the job's writes
    results: dict[str, Any] = jsonb("results")  # per-file report and counts (docs/importing.md)
    created_by: uuid.UUID = fk("users.id")
    created_at: datetime = ts()
    updated_at: datetime = ts()


class DocumentChunk(SQLModel, table=True):
    __tablename__ = "document_chunks"
    __table_args__ = (
        UniqueConstraint("version_id", "ordinal", name="document_chunks_version_ordinal_key"),
        Index("ix_document_chunks_document_version", "document_id", "version_id"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    workspace_id: uuid.UUID = fk("workspaces.id", ondelete="CASCADE")
    knowledge_base_id: uuid.UUID = fk("knowledge_bases.id", ondelete="CASCADE")
    document_id: uuid.UUID = fk("documents.id", ondelete="CASCADE")
    version_id: uuid.UUID = fk("document_versions.id", ondelete="CASCADE")
    ordinal: int
    heading_path: list[str] = text_array()
    content_text: str
    content_markdown: str
    token_count: int | None = None
    meta: dict[str, Any] = jsonb("metadata")
    created_at: datetime = ts()


class MilvusIndexProfile(SQLModel, table=True):
    """What OpenKB knows of a collection: names and function shapes, never provider keys."""

    __tablename__ = "milvus_index_profiles"
    __table_args__ = (
        CheckConstraint(check_in("status", PROFILE_STATUSES), name="milvus_index_profiles_status_check"),
        CheckConstraint("vector_dim >= 0", name="milvus_index_profiles_dim_check"),
        UniqueConstraint("collection_name", name="milvus_index_profiles_collection_key"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID | None = fk("tenants.id", nullable=True, ondelete="CASCADE")
    name: str = Field(unique=True)
    alias: str
    collection_name: str
    schema_version: str
    vector_dim: int
    embedding_function_name: str
    bm25_function_name: str | None = None
    rerank_function_name: str | None = None
    status: str
    function_metadata: dict[str, Any] = jsonb("function_metadata")
    created_by: uuid.UUID | None = fk("users.id", nullable=True, ondelete="SET NULL")
    created_at: datetime = ts()
    activated_at: datetime | None = ts(nullable=True)


class IndexRebuildJob(SQLModel, table=True):
    __tablename__ = "index_rebuild_jobs"
    __table_args__ = (CheckConstraint(check_in("status", REBUILD_STATUSES), name="index_rebuild_jobs_status_check"),)

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID | None = fk("tenants.id", nullable=True, ondelete="CASCADE")
    profile_id: uuid.UUID | None = fk("milvus_index_profiles.id", nullable=True, ondelete="SET NULL")
    target_collection: str
    target_alias: str
    status: str
    switch_on_success: bool = Field(default=False, sa_column_kwargs={"server_default": "false"})
    total_chunks: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    processed_chunks: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    last_chunk_id: uuid.UUID | None = None
    started_by: uuid.UUID | None = fk("users.id", nullable=True, ondelete="SET NULL")
    started_at: datetime = ts()
    finished_at: datetime | None = ts(nullable=True)
    error: str | None = None


class IndexVerifyJob(SQLModel, table=True):
    """``verify [--repair]`` of the active collection started from the admin console
    (docs/retrieval.md#administration), run by the worker; the console polls it, so a reload
    finds it again. ``phase`` says what it is doing, ``report`` is ``verify``'s report."""

    __tablename__ = "index_verify_jobs"
    __table_args__ = (
        CheckConstraint(check_in("status", VERIFY_STATUSES), name="index_verify_jobs_status_check"),
        Index("ix_index_verify_jobs_created", "created_at"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID | None = fk("tenants.id", nullable=True, ondelete="CASCADE")
    repair: bool = Field(default=False, sa_column_kwargs={"server_default": "false"})
    status: str
    phase: str | None = None
    collection: str | None = None
    report: dict[str, Any] = jsonb("report")
    error: str | None = None
    started_by: uuid.UUID | None = fk("users.id", nullable=True, ondelete="SET NULL")
    created_at: datetime = ts()
    started_at: datetime | None = ts(nullable=True)
    finished_at: datetime | None = ts(nullable=True)


class MilvusAliasSwitch(SQLModel, table=True):
    """One move of the active alias (docs/retrieval.md#rollback): PostgreSQL's history of what
    searches hit, which Milvus itself does not keep. ``rollback`` reads it to find "the
    collection active before the last switch" and writes its own row with ``reverts_id`` set, so
    a second rollback goes one step further back instead of flipping back to the new collection.
    ``id`` is a sequence, not a UUID: two switches in one transaction share ``now()``, and the
    order must still be exact."""

    __tablename__ = "milvus_alias_switches"
    __table_args__ = (
        CheckConstraint(check_in("kind", ALIAS_SWITCH_KINDS), name="milvus_alias_switches_kind_check"),
        Index("ix_milvus_alias_switches_alias", "alias", "id"),
    )

    id: int | None = Field(default=None, sa_column=Column(BigInteger, primary_key=True, autoincrement=True))
    alias: str
    from_collection: str | None = None
    to_collection: str
    kind: str
    reverts_id: int | None = Field(
        default=None,
        sa_column=Column(BigInteger, ForeignKey("milvus_alias_switches.id", ondelete="SET NULL"), nullable=True),
    )
    actor_type: str = Field(default="system")
    actor_user_id: uuid.UUID | None = fk("users.id", nullable=True, ondelete="SET NULL")
    created_at: datetime = ts()
