"""admin console: indexes for the users and audit lists, user deletion

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 18:25:00

The admin console (docs/web.md) lists users and audit rows server-side, paginated. Filled in by
the admin console change (issue 15).
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
