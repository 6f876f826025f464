"""admin console: index verify jobs, indexes for the users and audit lists

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 18:25:00

* ``index_verify_jobs``: ``verify [--repair]`` started from the admin console and run by the
  worker; the console polls it (docs/retrieval.md#administration).
* ``ix_audit_logs_actor_created`` and ``ix_audit_logs_tenant_action_created``: the console's audit
  filters by actor and by action, newest first, on 100k+ rows (bench/admin.py).
* ``ix_users_created``: the console's users list order (created_at, id).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "index_verify_jobs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=True),
        sa.Column("repair", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("phase", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("collection", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column(
            "report", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False
        ),
        sa.Column("error", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("started_by", sa.UUID(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'running', 'succeeded', 'failed')", name="index_verify_jobs_status_check"
        ),
        sa.ForeignKeyConstraint(["started_by"], ["users.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_index_verify_jobs_created", "index_verify_jobs", ["created_at"])
    op.create_index("ix_audit_logs_actor_created", "audit_logs", ["actor_user_id", "created_at"])
    op.create_index("ix_audit_logs_tenant_action_created", "audit_logs", ["tenant_id", "action", "created_at"])
    op.create_index("ix_users_created", "users", ["created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_users_created", table_name="users")
    op.drop_index("ix_audit_logs_tenant_action_created", table_name="audit_logs")
    op.drop_index("ix_audit_logs_actor_created", table_name="audit_logs")
    op.drop_index("ix_index_verify_jobs_created", table_name="index_verify_jobs")
    op.drop_table("index_verify_jobs")
