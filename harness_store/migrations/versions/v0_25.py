"""io-harness 0.25: background processes and their output.

`process_handles` keeps one row per process an agent started (unique per run and handle
number): command line, pids, state, exit code. `handle_output` appends each chunk of output a
poll read.

Releases 0.26 … 0.27 changed no schema: their names are this revision's branch labels, so
`alembic upgrade 0.27` lands here.

Revision ID: 0.25
Revises: 0.22
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

revision = "0.25"
down_revision = "0.22"
branch_labels = labels_for(revision)
depends_on = None


def upgrade() -> None:
    create_table(
        "process_handles",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("handle", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("line", sa.Text(), nullable=False),
        sa.Column("pids", sa.Text(), nullable=False, server_default=sa.text("''")),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("code", INT),
        sa.Column("reason", sa.Text()),
        sa.Column("started_at", sa.Text(), nullable=False, server_default=stamp_now()),
        sa.Column("ended_at", sa.Text()),
    )
    create_table(
        "handle_output",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("handle", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("chunk", sa.Text(), nullable=False),
        sa.Column("read_at", sa.Text(), nullable=False, server_default=stamp_now()),
    )
    create_index("process_handles_run", "process_handles", ["run_id", "handle"], unique=True)
    create_index("handle_output_run", "handle_output", ["run_id", "handle"])


def downgrade() -> None:
    drop_index("handle_output_run", "handle_output")
    drop_index("process_handles_run", "process_handles")
    drop_table("handle_output")
    drop_table("process_handles")
