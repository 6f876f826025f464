"""OAuth clients tied to an app installation (docs/apps.md)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 22:02:00

Claimed; filled in by the apps OAuth-grant work.
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
