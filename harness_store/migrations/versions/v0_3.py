"""io-harness 0.3: which provider ran a run (`runs.provider`), for the audit trace.

Revision ID: 0.3
Revises: 0.2
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import add_columns, drop_columns

revision = "0.3"
down_revision = "0.2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_columns("runs", sa.Column("provider", sa.Text()))


def downgrade() -> None:
    drop_columns("runs", "provider")
