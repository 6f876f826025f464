"""import jobs: target folder, run id and per-file results

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 16:20:00

An import job (``POST /api/import-jobs``, docs/importing.md#api-and-worker) imports one file,
several files or a zip: one source asset, many per-file results. ``import_jobs`` had room for one
document and a flat list of warnings only, so:

* ``target_id``: the folder imported into (null = the knowledge base's root);
* ``run_id``: the change-log run of the job's writes (revert it like any run);
* ``results``: the per-file report (path, status, document id, warnings, error) and the counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("import_jobs", sa.Column("target_id", sa.UUID(), nullable=True))
    op.create_foreign_key(
        "import_jobs_target_id_fkey", "import_jobs", "documents", ["target_id"], ["id"], ondelete="SET NULL"
    )
    op.add_column("import_jobs", sa.Column("run_id", sa.UUID(), nullable=True))
    op.add_column(
        "import_jobs",
        sa.Column(
            "results", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False
        ),
    )


def downgrade() -> None:
    op.drop_column("import_jobs", "results")
    op.drop_column("import_jobs", "run_id")
    op.drop_constraint("import_jobs_target_id_fkey", "import_jobs", type_="foreignkey")
    op.drop_column("import_jobs", "target_id")
