"""io-harness 0.9: no schema change.

The revision exists so that every release has one: a 0.9 store is stamped here, and
`alembic downgrade 0.9` names the release a person means.

Revision ID: 0.9
Revises: 0.8
"""

from __future__ import annotations

revision = "0.9"
down_revision = "0.8"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """0.9 left the schema as 0.8 had it."""


def downgrade() -> None:
    """Nothing to undo."""
