"""Assets with the same bytes share one blob (docs/data-model.md#assets)

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04 16:00:00

An upload whose bytes a row of the same tenant already stores points at that row's blob instead
of writing a second copy (``openkb.assets``), and a blob is deleted with its last row. Two
indexes serve those two lookups: by content (tenant, sha256) at upload, by ``object_key`` at
delete. Existing rows keep their own blobs until ``openkb assets dedupe`` merges them.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_document_assets_content", "document_assets", ["tenant_id", "sha256"])
    op.create_index("ix_document_assets_object_key", "document_assets", ["object_key"])


def downgrade() -> None:
    op.drop_index("ix_document_assets_object_key", table_name="document_assets")
    op.drop_index("ix_document_assets_content", table_name="document_assets")
