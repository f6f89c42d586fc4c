"""io-harness 0.31: plans put to a person before a run acts.

A `plans` row is a proposed plan (JSON steps) awaiting a verdict: approved, rejected, or
revised with a correction. It is indexed by (run_id, verdict) because every turn of the loop
asks whether the run has an approved plan.

Revision ID: 0.31
Revises: 0.30
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

revision = "0.31"
down_revision = "0.30"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "plans",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("steps", sa.Text(), nullable=False),
        sa.Column("verdict", sa.Text()),
        sa.Column("correction", sa.Text()),
        sa.Column("decided_by", sa.Text()),
        sa.Column("resolved", INT, nullable=False, server_default=sa.text("0")),
        sa.Column("proposed_at", sa.Text(), nullable=False, server_default=stamp_now()),
    )
    create_index("plans_run", "plans", ["run_id", "verdict"])


def downgrade() -> None:
    drop_index("plans_run", "plans")
    drop_table("plans")
