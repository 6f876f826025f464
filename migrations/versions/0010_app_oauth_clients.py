"""OAuth clients tied to an app installation (docs/apps.md#oauth)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 22:02:00

* ``mcp_oauth_clients.installation_id``: the app installation a client belongs to (at most one
  client per installation); its tokens are minted for the apps API (``/api/apps/v1``) only and
  act as that installation. Deleting the installation deletes its client, grants and tokens.
* ``mcp_oauth_clients.registration`` gains ``app`` for such clients.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("mcp_oauth_clients", sa.Column("installation_id", sa.UUID(), nullable=True))
    op.create_foreign_key(
        "mcp_oauth_clients_installation_id_fkey",
        "mcp_oauth_clients",
        "app_installations",
        ["installation_id"],
        ["id"],
        ondelete="CASCADE",
    )
    op.create_index("ix_mcp_oauth_clients_installation", "mcp_oauth_clients", ["installation_id"], unique=True)
    op.drop_constraint("mcp_oauth_clients_registration_check", "mcp_oauth_clients", type_="check")
    op.create_check_constraint(
        "mcp_oauth_clients_registration_check", "mcp_oauth_clients", "registration IN ('dcr', 'cimd', 'app')"
    )


def downgrade() -> None:
    op.execute("DELETE FROM mcp_oauth_clients WHERE registration = 'app'")
    op.drop_constraint("mcp_oauth_clients_registration_check", "mcp_oauth_clients", type_="check")
    op.create_check_constraint(
        "mcp_oauth_clients_registration_check", "mcp_oauth_clients", "registration IN ('dcr', 'cimd')"
    )
    op.drop_index("ix_mcp_oauth_clients_installation", table_name="mcp_oauth_clients")
    op.drop_constraint("mcp_oauth_clients_installation_id_fkey", "mcp_oauth_clients", type_="foreignkey")
    op.drop_column("mcp_oauth_clients", "installation_id")
