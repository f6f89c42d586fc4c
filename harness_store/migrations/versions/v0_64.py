"""io-harness 0.64: assistant turns staged with their step.

`step_turns` keeps the assistant side of each step's turn (text, possibly NULL, and the tool
calls as JSON), one row per (run_id, step) by a composite primary key, so a resumed run
replays its own turns.

Revision ID: 0.64
Revises: 0.62
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import INT, create_table, drop_table

revision = "0.64"
down_revision = "0.62"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "step_turns",
        sa.Column("run_id", INT, primary_key=True, nullable=False, autoincrement=False),
        sa.Column("step", INT, primary_key=True, nullable=False, autoincrement=False),
        sa.Column("text", sa.Text()),
        sa.Column("calls", sa.Text(), nullable=False),
        autoincrement=False,
    )


def downgrade() -> None:
    drop_table("step_turns")
