"""import jobs: target folder, run id and per-file results

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 16:20:00

(claimed; filled in by the import-jobs change)
"""
from __future__ import annotations

from typing import Sequence, Union

revision: str = '0004'
down_revision: Union[str, None] = '0003'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
