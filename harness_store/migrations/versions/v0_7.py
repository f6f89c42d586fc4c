"""io-harness 0.7: durable checkpoints and resume.

Runs gain a `status` (a crashed run stays `running`, the resume target) and a `started_at` from
the database clock (so a wall-clock budget survives a restart). `checkpoint_events` makes a
multi-crash history reconstructable; `spawns` keeps each child's contract so a tree resume
adopts a child instead of spawning it twice. The checkpoint-format marker (`user_version` on
SQLite) is stamped to 7 when lower: a store stamped higher is refused on resume.

Revision ID: 0.7
Revises: 0.6
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import (
    INT,
    add_columns,
    create_table,
    drop_columns,
    drop_table,
    id_column,
    lower_checkpoint_format,
    raise_checkpoint_format,
)

revision = "0.7"
down_revision = "0.6"
branch_labels = None
depends_on = None

CHECKPOINT_FORMAT = 7


def upgrade() -> None:
    add_columns(
        "runs",
        sa.Column("status", sa.Text(), nullable=False, server_default=sa.text("'running'")),
        sa.Column("started_at", sa.Text()),
    )
    create_table(
        "checkpoint_events",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text()),
    )
    create_table(
        "spawns",
        id_column(),
        sa.Column("parent_run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("child_run_id", INT, nullable=False),
        sa.Column("goal", sa.Text(), nullable=False),
        sa.Column("verify_file", sa.Text(), nullable=False),
        sa.Column("needle", sa.Text(), nullable=False),
        sa.Column("max_steps", INT),
        sa.Column("deny_write", sa.Text(), nullable=False, server_default=sa.text("'[]'")),
    )
    raise_checkpoint_format(CHECKPOINT_FORMAT)


def downgrade() -> None:
    lower_checkpoint_format()
    drop_table("spawns")
    drop_table("checkpoint_events")
    drop_columns("runs", "started_at", "status")
