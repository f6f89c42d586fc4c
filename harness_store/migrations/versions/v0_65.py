"""io-harness 0.65: tool attempts, open until resolved.

Before a tool whose effect cannot be checked runs, `tool_attempts` records the attempt, and
closes it afterwards, outside the step's transaction, so a crash mid-step leaves it open.
A partial index over the open attempts serves the resume check. Ids may be reused (no
AUTOINCREMENT).

Release 0.66 changed no schema: its name is this revision's branch label, so `alembic upgrade
0.66` lands here.

Revision ID: 0.65
Revises: 0.64
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
from harness_store.schema.release_labels import labels_for
from harness_store.sqldefaults import stamp_now

revision = "0.65"
down_revision = "0.64"
branch_labels = labels_for(revision)
depends_on = None


def upgrade() -> None:
    create_table(
        "tool_attempts",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("started_at", sa.Text(), nullable=False, server_default=stamp_now()),
        sa.Column("completed_at", sa.Text()),
        sa.Column("resolution", sa.Text()),
        autoincrement=False,
    )
    create_index("tool_attempts_open", "tool_attempts", ["run_id"], where="completed_at IS NULL")


def downgrade() -> None:
    drop_index("tool_attempts_open", "tool_attempts")
    drop_table("tool_attempts")
