"""io-harness 0.33: the run event stream.

`run_events` keeps every observer event as JSON with its kind and tree depth; its
AUTOINCREMENT id is a cursor another process can follow.

Revision ID: 0.33
Revises: 0.32
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

revision = "0.33"
down_revision = "0.32"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "run_events",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("depth", INT, nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("json", sa.Text(), nullable=False),
        sa.Column("at", sa.Text(), nullable=False, server_default=stamp_now()),
    )
    create_index("run_events_run", "run_events", ["run_id", "id"])


def downgrade() -> None:
    drop_index("run_events_run", "run_events")
    drop_table("run_events")
