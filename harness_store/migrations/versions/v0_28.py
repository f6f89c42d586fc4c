"""io-harness 0.28: file snapshots, so a run can be rewound.

The first time a run changes a file, `snapshots` keeps what the file held before (or that it
did not exist), once per file and run.

Release 0.29 changed no schema: its name is this revision's branch label, so `alembic upgrade
0.29` lands here.

Revision ID: 0.28
Revises: 0.25
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
from harness_store.sqldefaults import datetime_now

revision = "0.28"
down_revision = "0.25"
branch_labels = labels_for(revision)
depends_on = None


def upgrade() -> None:
    create_table(
        "snapshots",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("before", sa.Text()),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("at", sa.Text(), nullable=False, server_default=datetime_now()),
    )
    create_index("snapshots_run", "snapshots", ["run_id", "path"])


def downgrade() -> None:
    drop_index("snapshots_run", "snapshots")
    drop_table("snapshots")
