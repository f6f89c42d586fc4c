"""io-harness 0.60: messages between agents, and the names children are addressed by.

`agent_messages` is a tree's mailbox: sender and recipient run ids, the sender's name, and
`read_at` marking delivery. `spawns.as_name` (NOT NULL, default '') keeps the name a child was
given, so a resumed tree adopts it under the same name.

Release 0.61 changed no schema: its name is this revision's branch label, so `alembic upgrade
0.61` lands here.

Revision ID: 0.60
Revises: 0.58
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import (
    INT,
    add_columns,
    create_index,
    create_table,
    drop_columns,
    drop_index,
    drop_table,
    id_column,
)
from harness_store.schema.release_labels import labels_for
from harness_store.sqldefaults import stamp_now

revision = "0.60"
down_revision = "0.58"
branch_labels = labels_for(revision)
depends_on = None


def upgrade() -> None:
    add_columns(
        "spawns",
        sa.Column("as_name", sa.Text(), nullable=False, server_default=sa.text("''")),
    )
    create_table(
        "agent_messages",
        id_column(),
        sa.Column("from_run_id", INT, nullable=False),
        sa.Column("to_run_id", INT, nullable=False),
        sa.Column("from_name", sa.Text(), nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("sent_at", sa.Text(), nullable=False, server_default=stamp_now()),
        sa.Column("read_at", sa.Text()),
    )
    create_index("agent_messages_to", "agent_messages", ["to_run_id", "id"])


def downgrade() -> None:
    drop_index("agent_messages_to", "agent_messages")
    drop_table("agent_messages")
    drop_columns("spawns", "as_name")
