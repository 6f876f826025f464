"""Apps on a person's knowledge (docs/apps.md, docs/data-model.md#apps).

An ``App`` is a registration (manifest with requested permission strings); an
``AppInstallation`` binds it to one user in one tenant; its ``AppCredential`` (``kbapp_...``,
SHA-256 only) acts as that user narrowed to the ``AppGrant`` rows switched on. Collections are
knowledge bases and folders: ``AppPersonalSpace`` names each user's builtin ``diary`` and
``keep``; ``AppCollection`` records what an installation created (its own reach),
``AppSelectedCollection`` what the user chose for ``user-selected``. ``AppDocument`` remembers
which installation wrote a document first and the ``origin``/``source`` it carries.
``AppQuotaUsage`` counts writes per installation per local day in PostgreSQL, so replicas agree.

Facts, entities and predicates (the next issue) hang off installations the same way; their
permission strings are already parsed and stored as grants.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Date,
    ForeignKey,
    Index,
    Integer,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import UUID as PGUUID
from sqlmodel import Field, SQLModel

from openkb.models._base import check_in, fk, id_field, jsonb, text_array, ts

APP_STATUSES = ("active", "disabled")
INSTALLATION_STATUSES = ("active", "uninstalled")
UNINSTALL_MODES = ("keep", "delete")
APP_CREDENTIAL_STATUSES = ("active", "revoked")


class App(SQLModel, table=True):
    __tablename__ = "apps"
    __table_args__ = (
        CheckConstraint(check_in("status", APP_STATUSES), name="apps_status_check"),
        UniqueConstraint("tenant_id", "name", name="apps_tenant_name_key"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    name: str
    description: str = Field(default="")
    reason: str | None = None
    # the manifest as registered (permissions, predicates, reason, network hosts)
    manifest: dict[str, Any] = jsonb("manifest")
    permissions: list[str] = text_array()
    allowed_hosts: list[str] = text_array()
    status: str = Field(default="active")
    registered_by: uuid.UUID = fk("users.id")
    created_at: datetime = ts()
    updated_at: datetime = ts()


class AppInstallation(SQLModel, table=True):
    __tablename__ = "app_installations"
    __table_args__ = (
        CheckConstraint(check_in("status", INSTALLATION_STATUSES), name="app_installations_status_check"),
        CheckConstraint(
            check_in("uninstall_mode", UNINSTALL_MODES, nullable=True), name="app_installations_uninstall_mode_check"
        ),
        # one live installation of an app per user; uninstalled rows stay (the change log names them)
        Index(
            "ix_app_installations_live",
            "app_id",
            "user_id",
            unique=True,
            postgresql_where=text("status = 'active'"),
        ),
        Index("ix_app_installations_user", "tenant_id", "user_id"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    app_id: uuid.UUID = fk("apps.id", ondelete="CASCADE")
    user_id: uuid.UUID = fk("users.id", ondelete="CASCADE")
    status: str = Field(default="active")
    allowed_hosts: list[str] = text_array()
    created_at: datetime = ts()
    uninstalled_at: datetime | None = ts(nullable=True)
    uninstall_mode: str | None = None
    uninstall_run_id: uuid.UUID | None = None


class AppCredential(SQLModel, table=True):
    """``kbapp_...`` secrets: SHA-256 only; every call re-reads this row and the installation."""

    __tablename__ = "app_credentials"
    __table_args__ = (
        CheckConstraint(check_in("status", APP_CREDENTIAL_STATUSES), name="app_credentials_status_check"),
        UniqueConstraint("token_hash", name="app_credentials_token_hash_key"),
        Index("ix_app_credentials_installation", "installation_id"),
    )

    id: uuid.UUID = id_field()
    installation_id: uuid.UUID = fk("app_installations.id", ondelete="CASCADE")
    token_hash: str
    status: str = Field(default="active")
    created_at: datetime = ts()
    last_used_at: datetime | None = ts(nullable=True)
    revoked_at: datetime | None = ts(nullable=True)


class AppGrant(SQLModel, table=True):
    """One requested permission string of one installation; ``enabled`` is the user's switch
    (all off at install)."""

    __tablename__ = "app_grants"
    __table_args__ = (UniqueConstraint("installation_id", "permission", name="app_grants_installation_permission_key"),)

    id: uuid.UUID = id_field()
    installation_id: uuid.UUID = fk("app_installations.id", ondelete="CASCADE")
    permission: str
    enabled: bool = Field(default=False, sa_column=Column(Boolean, nullable=False, server_default=text("false")))
    updated_at: datetime = ts()


class AppSelectedCollection(SQLModel, table=True):
    """A collection the user chose for an installation's ``user-selected`` grants: a knowledge
    base (``document_id`` NULL) or a folder, with everything below it, present and future."""

    __tablename__ = "app_selected_collections"
    __table_args__ = (
        UniqueConstraint(
            "installation_id",
            "knowledge_base_id",
            "document_id",
            name="app_selected_collections_key",
            postgresql_nulls_not_distinct=True,
        ),
    )

    id: uuid.UUID = id_field()
    installation_id: uuid.UUID = fk("app_installations.id", ondelete="CASCADE")
    knowledge_base_id: uuid.UUID = fk("knowledge_bases.id", ondelete="CASCADE")
    document_id: uuid.UUID | None = fk("documents.id", nullable=True, ondelete="CASCADE")
    created_at: datetime = ts()


class AppCollection(SQLModel, table=True):
    """A collection an installation created (readable and writable by it, with what is below)."""

    __tablename__ = "app_collections"
    __table_args__ = (Index("ix_app_collections_installation", "installation_id"),)

    id: uuid.UUID = id_field()
    installation_id: uuid.UUID = fk("app_installations.id", ondelete="CASCADE")
    knowledge_base_id: uuid.UUID = fk("knowledge_bases.id", ondelete="CASCADE")
    document_id: uuid.UUID | None = fk("documents.id", nullable=True, ondelete="CASCADE")
    created_at: datetime = ts()


class AppDocument(SQLModel, table=True):
    """The installation that created a document, and its ``origin``/``source``."""

    __tablename__ = "app_documents"
    __table_args__ = (Index("ix_app_documents_installation", "installation_id"),)

    document_id: uuid.UUID = Field(
        sa_column=Column(
            "document_id",
            PGUUID(as_uuid=True),
            ForeignKey("documents.id", ondelete="CASCADE"),
            primary_key=True,
        )
    )
    installation_id: uuid.UUID = fk("app_installations.id", ondelete="CASCADE")
    origin: str
    source: str
    created_at: datetime = ts()
    updated_at: datetime = ts()


class AppPersonalSpace(SQLModel, table=True):
    """Each user's personal workspace with its builtin ``diary`` and ``keep`` knowledge bases."""

    __tablename__ = "app_personal_spaces"
    __table_args__ = (UniqueConstraint("tenant_id", "user_id", name="app_personal_spaces_tenant_user_key"),)

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    user_id: uuid.UUID = fk("users.id", ondelete="CASCADE")
    workspace_id: uuid.UUID = fk("workspaces.id", ondelete="CASCADE")
    diary_kb_id: uuid.UUID = fk("knowledge_bases.id", ondelete="CASCADE")
    keep_kb_id: uuid.UUID = fk("knowledge_bases.id", ondelete="CASCADE")
    created_at: datetime = ts()


class AppQuotaUsage(SQLModel, table=True):
    """Writes and written characters of one installation on one local day."""

    __tablename__ = "app_quota_usage"
    __table_args__ = (CheckConstraint("writes >= 0 AND chars >= 0", name="app_quota_usage_nonnegative_check"),)

    installation_id: uuid.UUID = Field(
        sa_column=Column(
            PGUUID(as_uuid=True),
            ForeignKey("app_installations.id", ondelete="CASCADE"),
            primary_key=True,
        )
    )
    day: date = Field(sa_column=Column(Date, primary_key=True))
    writes: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default=text("0")))
    chars: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, server_default=text("0")))
