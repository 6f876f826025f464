"""apps: registrations, installations, credentials, grants, collections, origins, quotas

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 18:25:00

Apps on a person's knowledge (docs/apps.md): an app is registered with a manifest, installed by
one user (``kbapp_...`` credential, hash only), and reaches what the user switched on
(``app_grants``, all off at install) intersected with the user's own permissions. Collections
are knowledge bases and folders (``app_personal_spaces`` names each user's builtin diary and
keep; ``app_collections`` what an installation created; ``app_selected_collections`` what the
user chose for ``user-selected``). ``changes.app_installation_id`` names the installation that
wrote a change. ``app_quota_usage`` counts writes per installation per local day.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_S = sqlmodel.sql.sqltypes.AutoString


def _ts(name: str, nullable: bool = False) -> sa.Column:
    if nullable:
        return sa.Column(name, sa.DateTime(timezone=True), nullable=True)
    return sa.Column(name, sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False)


def _arr(name: str) -> sa.Column:
    return sa.Column(name, postgresql.ARRAY(sa.Text()), server_default=sa.text("'{}'::text[]"), nullable=False)


def upgrade() -> None:
    op.create_table(
        "apps",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("name", _S(), nullable=False),
        sa.Column("description", _S(), nullable=False),
        sa.Column("reason", _S(), nullable=True),
        sa.Column(
            "manifest", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False
        ),
        _arr("permissions"),
        _arr("allowed_hosts"),
        sa.Column("status", _S(), nullable=False),
        sa.Column("registered_by", sa.UUID(), nullable=False),
        _ts("created_at"),
        _ts("updated_at"),
        sa.CheckConstraint("status IN ('active', 'disabled')", name="apps_status_check"),
        sa.ForeignKeyConstraint(["registered_by"], ["users.id"]),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tenant_id", "name", name="apps_tenant_name_key"),
    )
    op.create_table(
        "app_installations",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("app_id", sa.UUID(), nullable=False),
        sa.Column("user_id", sa.UUID(), nullable=False),
        sa.Column("status", _S(), nullable=False),
        _arr("allowed_hosts"),
        _ts("created_at"),
        _ts("uninstalled_at", nullable=True),
        sa.Column("uninstall_mode", _S(), nullable=True),
        sa.Column("uninstall_run_id", sa.Uuid(), nullable=True),
        sa.CheckConstraint("status IN ('active', 'uninstalled')", name="app_installations_status_check"),
        sa.CheckConstraint(
            "uninstall_mode IS NULL OR uninstall_mode IN ('keep', 'delete')",
            name="app_installations_uninstall_mode_check",
        ),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_app_installations_live",
        "app_installations",
        ["app_id", "user_id"],
        unique=True,
        postgresql_where=sa.text("status = 'active'"),
    )
    op.create_index("ix_app_installations_user", "app_installations", ["tenant_id", "user_id"], unique=False)
    op.create_table(
        "app_credentials",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("installation_id", sa.UUID(), nullable=False),
        sa.Column("token_hash", _S(), nullable=False),
        sa.Column("status", _S(), nullable=False),
        _ts("created_at"),
        _ts("last_used_at", nullable=True),
        _ts("revoked_at", nullable=True),
        sa.CheckConstraint("status IN ('active', 'revoked')", name="app_credentials_status_check"),
        sa.ForeignKeyConstraint(["installation_id"], ["app_installations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash", name="app_credentials_token_hash_key"),
    )
    op.create_index("ix_app_credentials_installation", "app_credentials", ["installation_id"], unique=False)
    op.create_table(
        "app_grants",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("installation_id", sa.UUID(), nullable=False),
        sa.Column("permission", _S(), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        _ts("updated_at"),
        sa.ForeignKeyConstraint(["installation_id"], ["app_installations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("installation_id", "permission", name="app_grants_installation_permission_key"),
    )
    op.create_table(
        "app_selected_collections",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("installation_id", sa.UUID(), nullable=False),
        sa.Column("knowledge_base_id", sa.UUID(), nullable=False),
        sa.Column("document_id", sa.UUID(), nullable=True),
        _ts("created_at"),
        sa.ForeignKeyConstraint(["document_id"], ["documents.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["installation_id"], ["app_installations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["knowledge_base_id"], ["knowledge_bases.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "installation_id",
            "knowledge_base_id",
            "document_id",
            name="app_selected_collections_key",
            postgresql_nulls_not_distinct=True,
        ),
    )
    op.create_table(
        "app_collections",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("installation_id", sa.UUID(), nullable=False),
        sa.Column("knowledge_base_id", sa.UUID(), nullable=False),
        sa.Column("document_id", sa.UUID(), nullable=True),
        _ts("created_at"),
        sa.ForeignKeyConstraint(["document_id"], ["documents.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["installation_id"], ["app_installations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["knowledge_base_id"], ["knowledge_bases.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_app_collections_installation", "app_collections", ["installation_id"], unique=False)
    op.create_table(
        "app_documents",
        sa.Column("document_id", sa.UUID(), nullable=False),
        sa.Column("installation_id", sa.UUID(), nullable=False),
        sa.Column("origin", _S(), nullable=False),
        sa.Column("source", _S(), nullable=False),
        _ts("created_at"),
        _ts("updated_at"),
        sa.ForeignKeyConstraint(["document_id"], ["documents.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["installation_id"], ["app_installations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("document_id"),
    )
    op.create_index("ix_app_documents_installation", "app_documents", ["installation_id"], unique=False)
    op.create_table(
        "app_personal_spaces",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("user_id", sa.UUID(), nullable=False),
        sa.Column("workspace_id", sa.UUID(), nullable=False),
        sa.Column("diary_kb_id", sa.UUID(), nullable=False),
        sa.Column("keep_kb_id", sa.UUID(), nullable=False),
        _ts("created_at"),
        sa.ForeignKeyConstraint(["diary_kb_id"], ["knowledge_bases.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["keep_kb_id"], ["knowledge_bases.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tenant_id", "user_id", name="app_personal_spaces_tenant_user_key"),
    )
    op.create_table(
        "app_quota_usage",
        sa.Column("installation_id", sa.UUID(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("writes", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("chars", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.CheckConstraint("writes >= 0 AND chars >= 0", name="app_quota_usage_nonnegative_check"),
        sa.ForeignKeyConstraint(["installation_id"], ["app_installations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("installation_id", "day"),
    )
    op.add_column("changes", sa.Column("app_installation_id", sa.UUID(), nullable=True))
    op.create_foreign_key(
        "changes_app_installation_id_fkey",
        "changes",
        "app_installations",
        ["app_installation_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.create_index("ix_changes_app_installation", "changes", ["app_installation_id", "created_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_changes_app_installation", table_name="changes")
    op.drop_constraint("changes_app_installation_id_fkey", "changes", type_="foreignkey")
    op.drop_column("changes", "app_installation_id")
    for t in (
        "app_quota_usage",
        "app_personal_spaces",
        "app_documents",
        "app_collections",
        "app_selected_collections",
        "app_grants",
        "app_credentials",
    ):
        op.drop_table(t)
    op.drop_index("ix_app_installations_user", table_name="app_installations")
    op.drop_index("ix_app_installations_live", table_name="app_installations")
    op.drop_table("app_installations")
    op.drop_table("apps")
