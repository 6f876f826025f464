"""documents.index_failure and documents.index_checked_at (issue 17: no lost index work)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 18:30:00

Claimed; filled in by the next commit.
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
