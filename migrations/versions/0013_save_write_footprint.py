"""What a save wrote that nothing reads (issue 17: bench/soak.py's database growth)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 03:50:00

A soak's saves grew the database by ~2 KB each. Most of it is what the product keeps: the new
version (history is kept, docs/data-model.md) and its change-log row (listed and reverted,
docs/api.md#runs-and-the-change-log). Two parts were written for nothing:

* ``ix_changes_app_installation`` indexed every change row, though only an app's writes have an
  installation: a person's or a job's save added a NULL entry no query looks up. It becomes
  partial (``WHERE app_installation_id IS NOT NULL``); the queries that use it ask for one
  installation, which implies NOT NULL, so they keep using it.
* ``document_export_forms`` kept the form of every version, though an export reads current
  versions only (docs/export.md#speed). A save now deletes the form of the version it supersedes
  (``openkb/content/versions.py``); here the forms of versions that are no longer current go.
  Nothing is lost: a version without a form gets one computed when an export needs it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_changes_app_installation", table_name="changes")
    op.create_index(
        "ix_changes_app_installation",
        "changes",
        ["app_installation_id", "created_at"],
        postgresql_where=sa.text("app_installation_id IS NOT NULL"),
    )
    op.execute(
        "DELETE FROM document_export_forms f USING document_versions v, documents d "
        "WHERE v.id = f.version_id AND d.id = v.document_id AND d.current_version_id IS DISTINCT FROM v.id"
    )


def downgrade() -> None:
    # the deleted forms are not restored: they were never read (a missing one is computed)
    op.drop_index("ix_changes_app_installation", table_name="changes")
    op.create_index("ix_changes_app_installation", "changes", ["app_installation_id", "created_at"])
