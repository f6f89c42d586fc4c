"""io-harness 0.6: sandbox lifecycle events — where and how each command was isolated.

Revision ID: 0.6
Revises: 0.5
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import INT, create_table, drop_table, id_column

revision = "0.6"
down_revision = "0.5"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "sandbox_events",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("backend", sa.Text()),
        sa.Column("detail", sa.Text()),
    )


def downgrade() -> None:
    drop_table("sandbox_events")
