"""tenants.time_zone: the tenant's default IANA time zone for users who set none (docs/apps.md)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 00:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("tenants", sa.Column("time_zone", sa.String(), nullable=True))


def downgrade() -> None:
    op.drop_column("tenants", "time_zone")
