"""facts, entities and the predicate vocabulary (docs/facts.md)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 19:20:00

* ``fact_predicates``: the vocabulary per tenant (core rows seeded by ``openkb.facts.vocabulary``
  lazily per tenant; app rows from manifests, kept after uninstall).
* ``entities`` (per user, one ``self`` each), ``entity_identifiers`` (normalized, unique per
  user + entity kind + identifier kind + value), ``facts`` (expire, never deleted),
  ``entity_mentions`` (chunks naming an entity).
* ``changes.status`` gains ``conflict``: a fact write refused because the user said otherwise is
  a change row the user sees, never applied.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_S = sqlmodel.sql.sqltypes.AutoString
_ROOTS = ("identity", "contact", "location", "relation", "pref", "schedule", "work", "health", "finance", "x")
_PATTERN = "^(" + "|".join(_ROOTS) + r")(\.[a-z][a-z0-9_]*)+$"


def _ts(name: str, nullable: bool = False) -> sa.Column:
    if nullable:
        return sa.Column(name, sa.DateTime(timezone=True), nullable=True)
    return sa.Column(name, sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False)


def upgrade() -> None:
    op.create_table(
        "fact_predicates",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("predicate", _S(), nullable=False),
        sa.Column("cardinality", _S(), nullable=False),
        sa.Column("name_zh", _S(), nullable=False),
        sa.Column("name_en", _S(), nullable=False),
        sa.Column("description", _S(), nullable=False),
        sa.Column("aliases", postgresql.ARRAY(sa.Text()), server_default=sa.text("'{}'::text[]"), nullable=False),
        sa.Column("origin", _S(), nullable=False),
        sa.Column("app_id", sa.UUID(), nullable=True),
        _ts("created_at"),
        sa.CheckConstraint("cardinality IN ('one', 'many')", name="fact_predicates_cardinality_check"),
        sa.CheckConstraint("origin IN ('core', 'app', 'user')", name="fact_predicates_origin_check"),
        sa.CheckConstraint(f"predicate ~ '{_PATTERN}'", name="fact_predicates_predicate_check"),
        sa.CheckConstraint("char_length(description) <= 200", name="fact_predicates_description_check"),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tenant_id", "predicate", name="fact_predicates_tenant_predicate_key"),
    )
    op.create_table(
        "entities",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("user_id", sa.UUID(), nullable=False),
        sa.Column("kind", _S(), nullable=False),
        sa.Column("display_name", _S(), nullable=False),
        sa.Column("merged_into", sa.UUID(), nullable=True),
        _ts("deleted_at", nullable=True),
        sa.Column("created_by_installation_id", sa.UUID(), nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
        sa.CheckConstraint("kind ~ '^[a-z][a-z0-9_-]{0,39}$'", name="entities_kind_check"),
        sa.ForeignKeyConstraint(["created_by_installation_id"], ["app_installations.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["merged_into"], ["entities.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_entities_self",
        "entities",
        ["tenant_id", "user_id"],
        unique=True,
        postgresql_where=sa.text("kind = 'self'"),
    )
    op.create_index("ix_entities_user_kind", "entities", ["tenant_id", "user_id", "kind"], unique=False)
    op.create_table(
        "entity_identifiers",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("user_id", sa.UUID(), nullable=False),
        sa.Column("entity_id", sa.UUID(), nullable=False),
        sa.Column("entity_kind", _S(), nullable=False),
        sa.Column("kind", _S(), nullable=False),
        sa.Column("value", _S(), nullable=False),
        sa.Column("display", _S(), nullable=False),
        _ts("created_at"),
        sa.CheckConstraint(
            "kind IN ('email', 'phone', 'domain', 'url', 'handle', 'name')", name="entity_identifiers_kind_check"
        ),
        sa.ForeignKeyConstraint(["entity_id"], ["entities.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "tenant_id", "user_id", "entity_kind", "kind", "value", name="entity_identifiers_user_kind_value_key"
        ),
    )
    op.create_index("ix_entity_identifiers_entity", "entity_identifiers", ["entity_id"], unique=False)
    op.create_table(
        "facts",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("user_id", sa.UUID(), nullable=False),
        sa.Column("subject_id", sa.UUID(), nullable=False),
        sa.Column("predicate", _S(), nullable=False),
        sa.Column("value", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("object_id", sa.UUID(), nullable=True),
        _ts("valid_from"),
        _ts("valid_to", nullable=True),
        sa.Column("said_by", _S(), nullable=False),
        sa.Column("installation_id", sa.UUID(), nullable=True),
        sa.Column("origin", _S(), nullable=False),
        sa.Column("source", _S(), nullable=False),
        sa.Column("source_ref", _S(), nullable=True),
        sa.Column("run_id", sa.Uuid(), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=True),
        sa.Column("inferred", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("pinned", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        _ts("created_at"),
        sa.CheckConstraint("said_by IN ('user', 'app')", name="facts_said_by_check"),
        sa.CheckConstraint("valid_to IS NULL OR valid_to >= valid_from", name="facts_valid_range_check"),
        sa.CheckConstraint("value IS NOT NULL OR object_id IS NOT NULL", name="facts_value_or_object_check"),
        sa.ForeignKeyConstraint(["installation_id"], ["app_installations.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["object_id"], ["entities.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["subject_id"], ["entities.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_facts_current",
        "facts",
        ["subject_id", "predicate"],
        unique=False,
        postgresql_where=sa.text("valid_to IS NULL"),
    )
    op.create_index("ix_facts_user", "facts", ["tenant_id", "user_id", "predicate"], unique=False)
    op.create_index("ix_facts_installation", "facts", ["installation_id"], unique=False)
    op.create_table(
        "entity_mentions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("entity_id", sa.UUID(), nullable=False),
        sa.Column("document_id", sa.UUID(), nullable=False),
        sa.Column("version_id", sa.UUID(), nullable=False),
        sa.Column("chunk_id", sa.UUID(), nullable=False),
        _ts("created_at"),
        sa.ForeignKeyConstraint(["chunk_id"], ["document_chunks.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["document_id"], ["documents.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["entity_id"], ["entities.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["version_id"], ["document_versions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("chunk_id", "entity_id", name="entity_mentions_chunk_entity_key"),
    )
    op.create_index("ix_entity_mentions_entity", "entity_mentions", ["entity_id"], unique=False)
    op.create_index("ix_entity_mentions_version", "entity_mentions", ["version_id"], unique=False)
    op.drop_constraint("changes_status_check", "changes", type_="check")
    op.create_check_constraint("changes_status_check", "changes", "status IN ('applied', 'reverted', 'conflict')")


def downgrade() -> None:
    op.execute("DELETE FROM changes WHERE status = 'conflict'")
    op.drop_constraint("changes_status_check", "changes", type_="check")
    op.create_check_constraint("changes_status_check", "changes", "status IN ('applied', 'reverted')")
    op.drop_table("entity_mentions")
    op.drop_index("ix_facts_installation", table_name="facts")
    op.drop_index("ix_facts_user", table_name="facts")
    op.drop_index("ix_facts_current", table_name="facts")
    op.drop_table("facts")
    op.drop_index("ix_entity_identifiers_entity", table_name="entity_identifiers")
    op.drop_table("entity_identifiers")
    op.drop_index("ix_entities_user_kind", table_name="entities")
    op.drop_index("ix_entities_self", table_name="entities")
    op.drop_table("entities")
    op.drop_table("fact_predicates")
