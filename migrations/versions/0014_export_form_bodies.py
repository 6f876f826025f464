"""Export forms hold their body, uncompressed and in line (docs/export.md#speed)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02 07:00:00

An export read each page's body from ``document_versions`` beside its form: per page a second
index lookup, a TOAST fetch and a decompression of the stored body, twice PostgreSQL's work for
the rest of the form (bench/export.py). The form now carries the body (``body``, UTF-8: the
version's Markdown, which never changes), so an export reads the form's row alone:

* ``body`` is added and filled from each form's version;
* ``body`` and ``deflated`` are ``STORAGE EXTERNAL`` (never compressed: the body would cost a
  decompression per read again, the deflated pieces do not compress) and the table's
  ``toast_tuple_target`` is the largest, so a row up to ~8 KB (a page of ~4 KB) stays in line
  in the table: one heap fetch per page; a larger row moves its values out of line, unchanged;
* the existing rows are rewritten (``deflated`` too) so they take the new layout.

The price is a second, uncompressed copy of each page's current body (old versions have no form).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openkb.exporting.forms import backfill_forms

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("document_export_forms", sa.Column("body", sa.LargeBinary(), nullable=True))
    op.execute(
        "ALTER TABLE document_export_forms ALTER COLUMN body SET STORAGE EXTERNAL, "
        "ALTER COLUMN deflated SET STORAGE EXTERNAL, SET (toast_tuple_target = 8160)"
    )
    # a concatenation makes a new value, stored by the new rules (an unchanged one keeps its TOAST)
    op.execute(
        "UPDATE document_export_forms f SET body = convert_to(v.markdown, 'UTF8'), "
        "deflated = f.deflated || ''::bytea FROM document_versions v WHERE v.id = f.version_id"
    )
    op.alter_column("document_export_forms", "body", nullable=False)
    backfill_forms(op.get_bind())  # any current version still without a form (nothing, normally)


def downgrade() -> None:
    op.execute(
        "ALTER TABLE document_export_forms ALTER COLUMN deflated SET STORAGE EXTENDED, RESET (toast_tuple_target)"
    )
    op.drop_column("document_export_forms", "body")
