"""users.time_zone: the user's IANA time zone, for the apps' daily quotas (docs/apps.md)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 21:40:00

Claimed first; filled in by the next commit.
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
