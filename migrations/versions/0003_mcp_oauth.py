"""MCP OAuth authorization server: access tokens, client registration kind, token bindings

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 16:05:00

* ``mcp_oauth_access_tokens``: short-lived access tokens (SHA-256 only) bound to a grant, its
  scopes and the RFC 8707 resource; one indexed lookup per MCP call (docs/oauth.md).
* ``mcp_oauth_clients.registration`` (``dcr`` | ``cimd``), ``metadata`` (the registered or
  fetched client metadata) and ``metadata_expires_at`` (Client ID Metadata Document cache).
* ``mcp_oauth_refresh_tokens.scopes`` / ``resource``: what a refresh mints again; an index on
  ``grant_id`` so revoking a grant (or detecting reuse) touches only its rows.
* ``mcp_oauth_grants.last_used_at``: shown in the user's list of connected applications.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "mcp_oauth_clients",
        sa.Column("registration", sqlmodel.sql.sqltypes.AutoString(), server_default="dcr", nullable=False),
    )
    op.add_column(
        "mcp_oauth_clients",
        sa.Column(
            "metadata", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False
        ),
    )
    op.add_column("mcp_oauth_clients", sa.Column("metadata_expires_at", sa.DateTime(timezone=True), nullable=True))
    op.create_check_constraint(
        "mcp_oauth_clients_registration_check", "mcp_oauth_clients", "registration IN ('dcr', 'cimd')"
    )
    op.add_column("mcp_oauth_grants", sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "mcp_oauth_refresh_tokens",
        sa.Column("scopes", postgresql.ARRAY(sa.Text()), server_default=sa.text("'{}'::text[]"), nullable=False),
    )
    op.add_column("mcp_oauth_refresh_tokens", sa.Column("resource", sqlmodel.sql.sqltypes.AutoString(), nullable=True))
    op.create_index("ix_mcp_oauth_refresh_tokens_grant", "mcp_oauth_refresh_tokens", ["grant_id"], unique=False)
    op.create_table(
        "mcp_oauth_access_tokens",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("grant_id", sa.UUID(), nullable=False),
        sa.Column("token_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("scopes", postgresql.ARRAY(sa.Text()), server_default=sa.text("'{}'::text[]"), nullable=False),
        sa.Column("resource", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["grant_id"], ["mcp_oauth_grants.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_index("ix_mcp_oauth_access_tokens_grant", "mcp_oauth_access_tokens", ["grant_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_mcp_oauth_access_tokens_grant", table_name="mcp_oauth_access_tokens")
    op.drop_table("mcp_oauth_access_tokens")
    op.drop_index("ix_mcp_oauth_refresh_tokens_grant", table_name="mcp_oauth_refresh_tokens")
    op.drop_column("mcp_oauth_refresh_tokens", "resource")
    op.drop_column("mcp_oauth_refresh_tokens", "scopes")
    op.drop_column("mcp_oauth_grants", "last_used_at")
    op.drop_constraint("mcp_oauth_clients_registration_check", "mcp_oauth_clients", type_="check")
    op.drop_column("mcp_oauth_clients", "metadata_expires_at")
    op.drop_column("mcp_oauth_clients", "metadata")
    op.drop_column("mcp_oauth_clients", "registration")
