"""What a save writes that nothing reads (issue 17, bench/soak.py)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 03:50:00

Claimed; filled in by the commit that follows.
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
