"""apps: registrations, installations, grants, refs and quotas

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 18:25:00

Apps on a person's knowledge (docs/apps.md). Filled in by the apps change.
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
