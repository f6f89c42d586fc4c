"""io-harness 0.12: run summaries, and file stores in WAL.

`run_outcomes` holds one row per finished run — outcome, success, steps (MAX(step)), tokens,
duration and the end stamp — so "did it work, how long, what did it cost" is one read. 0.12's
open also switches a file store to WAL (a persistent property of the file) so a second process
can read a trace while a run writes it; the switch cannot run inside a transaction.

Downgrading drops `run_outcomes` but leaves the file in WAL, which every release reads.

Revision ID: 0.12
Revises: 0.11
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import INT, create_table, drop_table, switch_to_wal

revision = "0.12"
down_revision = "0.11"
branch_labels = None
depends_on = None


def upgrade() -> None:
    switch_to_wal()
    create_table(
        "run_outcomes",
        sa.Column("run_id", INT, primary_key=True, nullable=True, autoincrement=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("success", INT, nullable=False),
        sa.Column("steps", INT, nullable=False),
        sa.Column("tokens", INT, nullable=False),
        sa.Column("duration_ms", INT),
        sa.Column("finished_at", sa.Text(), nullable=False),
        autoincrement=False,
    )


def downgrade() -> None:
    drop_table("run_outcomes")
