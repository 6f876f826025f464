"""Facts, entities and the predicate vocabulary (docs/facts.md).

Revision ID: 0008
Revises: 0007
"""

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
