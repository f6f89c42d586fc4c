"""io-harness 0.62: run leases.

`run_leases` says which process drives a run: owner, a generation raised at every take-over,
and a time to live. A step commit checks the generation, so a driver that lost its lease
writes nothing. `run_id` is the rowid; no other index.

Release 0.63 changed no schema: its name is this revision's branch label, so `alembic upgrade
0.63` lands here.

Revision ID: 0.62
Revises: 0.60
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import INT, create_table, drop_table
from harness_store.schema.release_labels import labels_for
from harness_store.sqldefaults import stamp_now

revision = "0.62"
down_revision = "0.60"
branch_labels = labels_for(revision)
depends_on = None


def upgrade() -> None:
    create_table(
        "run_leases",
        sa.Column("run_id", INT, primary_key=True, nullable=True, autoincrement=False),
        sa.Column("owner", sa.Text(), nullable=False),
        sa.Column("generation", INT, nullable=False),
        sa.Column("acquired_at", sa.Text(), nullable=False, server_default=stamp_now()),
        sa.Column("renewed_at", sa.Text(), nullable=False, server_default=stamp_now()),
        sa.Column("ttl_secs", INT, nullable=False),
        autoincrement=False,
    )


def downgrade() -> None:
    drop_table("run_leases")
