"""io-harness 0.30: memory kinds, pins and recalls; indexes for the roll-ups.

Memory entries gain `kind` (NULL: a fact) and `pinned` (NULL: not pinned), both added by
`ALTER TABLE`. `memory_recalls` logs which run and step drew on which entry. Six indexes let
the accounting roll-ups read through an index instead of scanning. One of them,
`sandbox_events_run_kind (run_id, kind)`, starts with `run_id`, so harness_store's own
`hs_sandbox_events_run_id` is redundant from here: this revision drops it, and its downgrade
puts it back.

Revision ID: 0.30
Revises: 0.28
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import (
    INT,
    add_columns,
    create_index,
    create_table,
    drop_columns,
    drop_index,
    drop_table,
    id_column,
)
from harness_store.sqldefaults import datetime_now

revision = "0.30"
down_revision = "0.28"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_columns(
        "memory",
        sa.Column("kind", sa.Text()),
        sa.Column("pinned", INT),
    )
    create_table(
        "memory_recalls",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("at", sa.Text(), nullable=False, server_default=datetime_now()),
        autoincrement=False,
    )
    create_index("memory_recalls_run", "memory_recalls", ["run_id"])
    create_index("run_outcomes_outcome", "run_outcomes", ["outcome"])
    create_index("run_outcomes_finished", "run_outcomes", ["finished_at"])
    create_index("sandbox_events_kind_detail", "sandbox_events", ["kind", "detail"])
    create_index("sandbox_events_run_kind", "sandbox_events", ["run_id", "kind"])
    create_index("context_events_kind", "context_events", ["kind"])
    create_index("checkpoint_events_kind", "checkpoint_events", ["kind"])
    drop_index("hs_sandbox_events_run_id", "sandbox_events")


def downgrade() -> None:
    create_index("hs_sandbox_events_run_id", "sandbox_events", ["run_id"])
    drop_index("checkpoint_events_kind", "checkpoint_events")
    drop_index("context_events_kind", "context_events")
    drop_index("sandbox_events_run_kind", "sandbox_events")
    drop_index("sandbox_events_kind_detail", "sandbox_events")
    drop_index("run_outcomes_finished", "run_outcomes")
    drop_index("run_outcomes_outcome", "run_outcomes")
    drop_index("memory_recalls_run", "memory_recalls")
    drop_table("memory_recalls")
    drop_columns("memory", "pinned", "kind")
