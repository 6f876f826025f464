"""MCP OAuth authorization server: access tokens, client registration kind, token bindings

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 16:05:00

(claimed; filled in by the OAuth authorization server commit)
"""
from __future__ import annotations

from typing import Sequence, Union

revision: str = '0003'
down_revision: Union[str, None] = '0002'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
