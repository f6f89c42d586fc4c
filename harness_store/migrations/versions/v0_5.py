"""io-harness 0.5: sub-agent trees.

Runs gain their parent edge and depth, so a tree is reconstructable from the store; a new
`agent_events` table records spawns, refused spawns and draws on the tree's shared budget.
Upstream always added the two columns by ALTER, so they follow the older columns.

Revision ID: 0.5
Revises: 0.4
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import (
    INT,
    add_columns,
    create_table,
    drop_columns,
    drop_table,
    id_column,
)

revision = "0.5"
down_revision = "0.4"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_columns(
        "runs",
        sa.Column("parent_run_id", INT),
        sa.Column("depth", INT, nullable=False, server_default=sa.text("0")),
    )
    create_table(
        "agent_events",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("child_run_id", INT),
        sa.Column("detail", sa.Text()),
        sa.Column("tokens", INT),
        sa.Column("remaining", INT),
    )


def downgrade() -> None:
    drop_table("agent_events")
    drop_columns("runs", "depth", "parent_run_id")
