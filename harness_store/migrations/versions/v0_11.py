"""io-harness 0.11: no schema change.

The revision exists so that every release has one: a 0.11 store is stamped here.

Revision ID: 0.11
Revises: 0.10
"""

from __future__ import annotations

revision = "0.11"
down_revision = "0.10"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """0.11 left the schema as 0.10 had it."""


def downgrade() -> None:
    """Nothing to undo."""
