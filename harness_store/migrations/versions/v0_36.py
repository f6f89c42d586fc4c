"""io-harness 0.36: rewinds, and the memory snapshots they restore.

`memory_snapshots` keeps a memory entry as it was before a run first changed it (unique per
run, workspace and key); `rewinds` records what each rewind restored, removed and cleared, as
JSON lists.

Revision ID: 0.36
Revises: 0.34
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
from harness_store.sqldefaults import datetime_now, stamp_now

revision = "0.36"
down_revision = "0.34"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "memory_snapshots",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("before", sa.Text()),
        sa.Column("kind", sa.Text()),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("at", sa.Text(), nullable=False, server_default=datetime_now()),
    )
    create_table(
        "rewinds",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("files", sa.Text(), nullable=False),
        sa.Column("memory_restored", sa.Text(), nullable=False),
        sa.Column("memory_removed", sa.Text(), nullable=False),
        sa.Column("queue_cleared", sa.Text(), nullable=False),
        sa.Column("at", sa.Text(), nullable=False, server_default=stamp_now()),
    )
    create_index(
        "memory_snapshots_entry", "memory_snapshots", ["run_id", "workspace", "key"], unique=True
    )
    create_index("rewinds_run", "rewinds", ["run_id", "id"])


def downgrade() -> None:
    drop_index("rewinds_run", "rewinds")
    drop_index("memory_snapshots_entry", "memory_snapshots")
    drop_table("rewinds")
    drop_table("memory_snapshots")
