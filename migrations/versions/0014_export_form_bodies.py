"""Export forms hold their body (docs/export.md#speed)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02 07:00:00

Claimed for issue 20 (export speed); filled in by the next commit.
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
