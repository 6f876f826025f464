"""Detached assets are kept for a retention period, then pruned (docs/data-model.md#assets)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04 18:30:00

An asset row without a document (its page purged, an import's uploaded source, an upload never
attached) used to stay forever with its blob. ``detached_at`` records since when it has had no
document, so ``openkb assets prune`` and the worker's daily pass can delete it after
``ASSET_RETENTION_DAYS`` (a purge reverted within that time gets its images back). Rows detached
before this migration count from now: nobody loses a file they could still restore today.

An import job's source may now be pruned once the job has finished: the job row stays, its
``source_asset_id`` becomes NULL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("document_assets", sa.Column("detached_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE document_assets SET detached_at = now() WHERE document_id IS NULL")
    # the prune walks the detached rows by id, a batch at a time: only they are in this index
    op.create_index(
        "ix_document_assets_detached",
        "document_assets",
        ["id"],
        postgresql_where=sa.text("document_id IS NULL"),
    )
    op.alter_column("import_jobs", "source_asset_id", nullable=True)
    op.drop_constraint("import_jobs_source_asset_id_fkey", "import_jobs", type_="foreignkey")
    op.create_foreign_key(
        "import_jobs_source_asset_id_fkey",
        "import_jobs",
        "document_assets",
        ["source_asset_id"],
        ["id"],
        ondelete="SET NULL",
    )


def downgrade() -> None:
    op.drop_constraint("import_jobs_source_asset_id_fkey", "import_jobs", type_="foreignkey")
    op.execute("DELETE FROM import_jobs WHERE source_asset_id IS NULL")
    op.create_foreign_key(
        "import_jobs_source_asset_id_fkey", "import_jobs", "document_assets", ["source_asset_id"], ["id"]
    )
    op.alter_column("import_jobs", "source_asset_id", nullable=False)
    op.drop_index("ix_document_assets_detached", table_name="document_assets")
    op.drop_column("document_assets", "detached_at")
