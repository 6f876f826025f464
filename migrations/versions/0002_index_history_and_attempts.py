"""index operations: alias switch history, profile statuses ready/dropped, documents.index_attempts

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 15:40:00

* ``milvus_alias_switches``: every move of the active alias (from, to, kind, reverts, who, when),
  so ``openkb index rollback`` means "the collection active before the last switch" and
  ``openkb index history`` can show it (docs/retrieval.md, docs/operations.md).
* ``milvus_index_profiles.status`` also allows ``ready`` (rebuilt and healthy, not active) and
  ``dropped`` (its collection was dropped; the profile is kept for a later rebuild).
* ``documents.index_attempts``: failed index runs of the current version; the document stays
  ``pending`` while the worker retries and becomes ``failed`` only when it gives up.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_STATUSES = "status IN ('building', 'active', 'deprecated', 'failed')"
_NEW_STATUSES = "status IN ('building', 'ready', 'active', 'deprecated', 'failed', 'dropped')"


def upgrade() -> None:
    op.create_table(
        "milvus_alias_switches",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("alias", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("from_collection", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("to_collection", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("reverts_id", sa.BigInteger(), nullable=True),
        sa.Column("actor_type", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("actor_user_id", sa.UUID(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("kind IN ('initial', 'switch', 'rollback')", name="milvus_alias_switches_kind_check"),
        sa.ForeignKeyConstraint(["actor_user_id"], ["users.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["reverts_id"], ["milvus_alias_switches.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_milvus_alias_switches_alias", "milvus_alias_switches", ["alias", "id"], unique=False)
    op.drop_constraint("milvus_index_profiles_status_check", "milvus_index_profiles", type_="check")
    op.create_check_constraint("milvus_index_profiles_status_check", "milvus_index_profiles", _NEW_STATUSES)
    op.add_column("documents", sa.Column("index_attempts", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    op.drop_column("documents", "index_attempts")
    op.execute("UPDATE milvus_index_profiles SET status = 'building' WHERE status = 'ready'")
    op.execute("UPDATE milvus_index_profiles SET status = 'deprecated' WHERE status = 'dropped'")
    op.drop_constraint("milvus_index_profiles_status_check", "milvus_index_profiles", type_="check")
    op.create_check_constraint("milvus_index_profiles_status_check", "milvus_index_profiles", _OLD_STATUSES)
    op.drop_index("ix_milvus_alias_switches_alias", table_name="milvus_alias_switches")
    op.drop_table("milvus_alias_switches")
