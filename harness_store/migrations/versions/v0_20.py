"""io-harness 0.20: conversational sessions, each a tree of turns.

A `sessions` row is one conversation rooted at a directory; `head_turn_id` names the turn the
conversation continues from, which is chosen, not simply the newest. Each `session_turns` row
is a prompt answered by a run, linked to the turn before it.

Revision ID: 0.20
Revises: 0.18
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import INT, create_table, drop_table, id_column
from harness_store.sqldefaults import stamp_now

revision = "0.20"
down_revision = "0.18"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "sessions",
        id_column(),
        sa.Column("root", sa.Text(), nullable=False),
        sa.Column("head_turn_id", INT),
        sa.Column("created_at", sa.Text(), nullable=False, server_default=stamp_now()),
    )
    create_table(
        "session_turns",
        id_column(),
        sa.Column("session_id", INT, nullable=False),
        sa.Column("parent_turn_id", INT),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("reply", sa.Text()),
        sa.Column("outcome", sa.Text()),
        sa.Column("created_at", sa.Text(), nullable=False, server_default=stamp_now()),
    )


def downgrade() -> None:
    drop_table("session_turns")
    drop_table("sessions")
