"""io-harness 0.1: the baseline — runs and their steps.

A run is a goal and the file it works on; each step records what the agent decided and what came
of it, so a crashed run can be resumed under the same id and audited afterwards. Tables are
created only where missing, because a 0.1 open killed between its two CREATEs leaves `runs`
alone.

Revision ID: 0.1
Revises: (base)
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import INT, create_table, drop_table, id_column

revision = "0.1"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "runs",
        id_column(),
        sa.Column("goal", sa.Text(), nullable=False),
        sa.Column("file", sa.Text(), nullable=False),
        sa.Column("outcome", sa.Text()),
    )
    create_table(
        "steps",
        id_column(),
        sa.Column("run_id", INT, sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("decision", sa.Text(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    drop_table("steps")
    drop_table("runs")
