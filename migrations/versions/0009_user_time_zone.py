"""users.time_zone: the user's IANA time zone, for the apps' daily quotas (docs/apps.md)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 21:40:00

* ``users.time_zone``: an IANA name PostgreSQL knows (``Asia/Shanghai``), set by the user on
  their profile; NULL means UTC. An installation's quota day is the user's local day
  (docs/apps.md#limits-and-quotas), computed in PostgreSQL so replicas agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("users", sa.Column("time_zone", sa.String(), nullable=True))


def downgrade() -> None:
    op.drop_column("users", "time_zone")
