"""Export forms of document versions (docs/export.md#speed)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 00:35:00

* ``document_export_forms``: one row per version, written with the version: its internal
  references (byte offsets, and their ids) and its body as raw deflate, each reference a stored block of its
  own (``openkb/exporting/forms.py``), so an export neither scans nor deflates the body again.
* Backfill (``backfill_forms``): the current version of every page gets its form, in batches
  (older versions are not exported; one that lacks a form is computed when needed, with the
  same bytes).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from openkb.exporting.forms import backfill_forms

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "document_export_forms",
        sa.Column("version_id", sa.UUID(), nullable=False),
        sa.Column("form", sa.SmallInteger(), nullable=False),
        sa.Column("refs", postgresql.ARRAY(sa.Integer()), nullable=False),
        sa.Column("keys", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("blocks", postgresql.ARRAY(sa.Integer()), nullable=False),
        sa.Column("deflated", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["version_id"], ["document_versions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("version_id"),
    )
    backfill_forms(op.get_bind(), body=False)  # the table has no body column until 0014


def downgrade() -> None:
    op.drop_table("document_export_forms")
