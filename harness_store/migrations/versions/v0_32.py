"""io-harness 0.32: the queue of children waiting to spawn.

Children that wait for a free concurrency slot are queued in `agent_queue`; its unique index
on (parent_run_id, step, goal) makes queueing the same child twice a no-op.

Revision ID: 0.32
Revises: 0.31
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import (
    INT,
    create_index,
    create_table,
    drop_index,
    drop_table,
    id_column,
)
from harness_store.sqldefaults import stamp_now

revision = "0.32"
down_revision = "0.31"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "agent_queue",
        id_column(),
        sa.Column("parent_run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("goal", sa.Text(), nullable=False),
        sa.Column("depth", INT, nullable=False),
        sa.Column("queued_at", sa.Text(), nullable=False, server_default=stamp_now()),
    )
    create_index("agent_queue_entry", "agent_queue", ["parent_run_id", "step", "goal"], unique=True)


def downgrade() -> None:
    drop_index("agent_queue_entry", "agent_queue")
    drop_table("agent_queue")
