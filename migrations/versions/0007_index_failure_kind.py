"""documents.index_failure and documents.index_checked_at: no lost index work (issue 17)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 18:30:00

* ``documents.index_failure``: why the last index run failed, ``transient`` (Milvus or the
  embedder unreachable: the document stays ``pending`` and is retried for as long as the outage
  lasts) or ``permanent`` (Milvus refused the document's data: ``failed`` at once, not retried
  until the document changes); NULL after a success.
* ``documents.index_checked_at``: when an index run last recorded an outcome for the document.
  The reconciler (``openkb.indexing.reconcile``) re-enqueues pages ``pending`` since before a
  deadline, which is how a job lost with a killed worker is found (docs/operations.md#index-operations).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("documents", sa.Column("index_failure", sa.String(), nullable=True))
    op.add_column("documents", sa.Column("index_checked_at", sa.DateTime(timezone=True), nullable=True))
    op.create_check_constraint(
        "documents_index_failure_check",
        "documents",
        "index_failure IS NULL OR index_failure IN ('transient', 'permanent')",
    )
    # what ``index_status='failed'`` meant before: given up after retries, i.e. mostly outages
    op.execute("UPDATE documents SET index_failure = 'transient' WHERE index_status = 'failed'")


def downgrade() -> None:
    op.drop_constraint("documents_index_failure_check", "documents", type_="check")
    op.drop_column("documents", "index_checked_at")
    op.drop_column("documents", "index_failure")
