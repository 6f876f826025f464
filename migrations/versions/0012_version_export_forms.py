"""Export forms of document versions (docs/export.md#speed)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 00:35:00

Claimed; filled in by the export speed work.
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
