"""MCP OAuth/PAT persistence and Dify scoped keys (docs/data-model.md#integrations). Hashes only."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from openkb.models._base import check_in, fk, id_field, jsonb, text_array, ts, uuid_array
from openkb.models.enums import (
    CLIENT_REGISTRATIONS,
    CLIENT_STATUSES,
    DIFY_KEY_STATUSES,
    GRANT_STATUSES,
    MAPPING_STATUSES,
    PAT_STATUSES,
)


class McpOAuthClient(SQLModel, table=True):
    """An OAuth client of the MCP authorization server (docs/oauth.md): registered by RFC 7591
    (``registration='dcr'``) or known by its Client ID Metadata Document URL (``'cimd'``, the
    fetched document cached until ``metadata_expires_at``)."""

    __tablename__ = "mcp_oauth_clients"
    __table_args__ = (
        CheckConstraint(check_in("status", CLIENT_STATUSES), name="mcp_oauth_clients_status_check"),
        CheckConstraint(check_in("registration", CLIENT_REGISTRATIONS), name="mcp_oauth_clients_registration_check"),
        Index("ix_mcp_oauth_clients_installation", "installation_id", unique=True),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    client_id: str = Field(unique=True)
    client_name: str
    redirect_uris: list[str] = text_array()
    allowed_scopes: list[str] = text_array()
    status: str
    registration: str = Field(default="dcr", sa_column_kwargs={"server_default": "dcr"})
    meta: dict[str, Any] = jsonb("metadata")
    metadata_expires_at: datetime | None = ts(nullable=True)
    created_by: uuid.UUID | None = fk("users.id", nullable=True, ondelete="SET NULL")
    created_at: datetime = ts()
    updated_at: datetime = ts()
    # ``registration='app'``: the client of one app installation; its tokens are for the apps
    # API only and act as the installation (docs/apps.md#oauth). NULL for MCP clients.
    installation_id: uuid.UUID | None = fk("app_installations.id", nullable=True, ondelete="CASCADE")


class McpOAuthGrant(SQLModel, table=True):
    __tablename__ = "mcp_oauth_grants"
    __table_args__ = (
        CheckConstraint(check_in("status", GRANT_STATUSES), name="mcp_oauth_grants_status_check"),
        Index("ix_mcp_oauth_grants_user", "user_id"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    user_id: uuid.UUID = fk("users.id", ondelete="CASCADE")
    client_id: uuid.UUID = fk("mcp_oauth_clients.id", ondelete="CASCADE")
    scopes: list[str] = text_array()
    status: str
    expires_at: datetime | None = ts(nullable=True)
    revoked_at: datetime | None = ts(nullable=True)
    last_used_at: datetime | None = ts(nullable=True)
    created_at: datetime = ts()


class McpOAuthAuthorizationCode(SQLModel, table=True):
    __tablename__ = "mcp_oauth_authorization_codes"

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    grant_id: uuid.UUID = fk("mcp_oauth_grants.id", ondelete="CASCADE")
    code_hash: str = Field(unique=True)
    redirect_uri: str
    scopes: list[str] = text_array()
    code_challenge: str | None = None
    resource: str | None = None
    expires_at: datetime = ts()
    consumed_at: datetime | None = ts(nullable=True)
    created_at: datetime = ts()


class McpOAuthRefreshToken(SQLModel, table=True):
    """One refresh token of a grant. Rotation sets ``revoked_at``; presenting a token whose
    ``revoked_at`` is set while its grant is active is reuse, and revokes the grant."""

    __tablename__ = "mcp_oauth_refresh_tokens"
    __table_args__ = (Index("ix_mcp_oauth_refresh_tokens_grant", "grant_id"),)

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    grant_id: uuid.UUID = fk("mcp_oauth_grants.id", ondelete="CASCADE")
    token_hash: str = Field(unique=True)
    scopes: list[str] = text_array()
    resource: str | None = None
    expires_at: datetime = ts()
    revoked_at: datetime | None = ts(nullable=True)
    created_at: datetime = ts()


class McpOAuthAccessToken(SQLModel, table=True):
    """A short-lived OAuth access token (SHA-256 only), bound to its grant, scopes and RFC 8707
    resource. Checked by one indexed lookup joined to the grant and the user, so revoking the
    grant or suspending the user stops the next call (docs/oauth.md)."""

    __tablename__ = "mcp_oauth_access_tokens"
    __table_args__ = (Index("ix_mcp_oauth_access_tokens_grant", "grant_id"),)

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    grant_id: uuid.UUID = fk("mcp_oauth_grants.id", ondelete="CASCADE")
    token_hash: str = Field(unique=True)
    scopes: list[str] = text_array()
    resource: str
    expires_at: datetime = ts()
    created_at: datetime = ts()


class McpPersonalAccessToken(SQLModel, table=True):
    """Personal access tokens (``kbpat_...``): bound to a real user, valid on REST and /mcp."""

    __tablename__ = "mcp_personal_access_tokens"
    __table_args__ = (
        CheckConstraint(check_in("status", PAT_STATUSES), name="mcp_personal_access_tokens_status_check"),
        Index("ix_mcp_personal_access_tokens_user", "user_id"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    user_id: uuid.UUID = fk("users.id", ondelete="CASCADE")
    name: str
    token_hash: str = Field(unique=True)
    scopes: list[str] = text_array()
    status: str
    expires_at: datetime | None = ts(nullable=True)
    last_used_at: datetime | None = ts(nullable=True)
    revoked_at: datetime | None = ts(nullable=True)
    created_at: datetime = ts()


class DifyApiKey(SQLModel, table=True):
    __tablename__ = "dify_api_keys"
    __table_args__ = (
        CheckConstraint(check_in("status", DIFY_KEY_STATUSES), name="dify_api_keys_status_check"),
        CheckConstraint("retrieval_top_k_limit > 0", name="dify_api_keys_top_k_check"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    name: str
    key_hash: str = Field(unique=True)
    status: str
    allowed_knowledge_base_ids: list[uuid.UUID] = uuid_array()
    allowed_metadata_filters: dict[str, Any] = jsonb("allowed_metadata_filters")
    retrieval_top_k_limit: int = Field(default=10, sa_column_kwargs={"server_default": "10"})
    expires_at: datetime | None = ts(nullable=True)
    last_used_at: datetime | None = ts(nullable=True)
    created_by: uuid.UUID | None = fk("users.id", nullable=True, ondelete="SET NULL")
    created_at: datetime = ts()
    updated_at: datetime = ts()


class DifyKnowledgeMapping(SQLModel, table=True):
    __tablename__ = "dify_knowledge_mappings"
    __table_args__ = (
        CheckConstraint(check_in("status", MAPPING_STATUSES), name="dify_knowledge_mappings_status_check"),
        UniqueConstraint("tenant_id", "dify_knowledge_id", name="dify_knowledge_mappings_tenant_knowledge_key"),
    )

    id: uuid.UUID = id_field()
    tenant_id: uuid.UUID = fk("tenants.id", ondelete="CASCADE")
    dify_knowledge_id: str
    knowledge_base_id: uuid.UUID = fk("knowledge_bases.id", ondelete="CASCADE")
    status: str
    created_by: uuid.UUID | None = fk("users.id", nullable=True, ondelete="SET NULL")
    created_at: datetime = ts()
    updated_at: datetime = ts()
