"""io-harness 0.8: MCP events — connects, tool discovery, tool calls, disconnects.

Network verdicts stay in `policy_events` beside every other permission decision; this table is
the MCP conversation itself.

Revision ID: 0.8
Revises: 0.7
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import INT, create_table, drop_table, id_column

revision = "0.8"
down_revision = "0.7"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "mcp_events",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("server", sa.Text(), nullable=False),
        sa.Column("tool", sa.Text()),
        sa.Column("ok", INT),
        sa.Column("millis", INT),
        sa.Column("detail", sa.Text()),
    )


def downgrade() -> None:
    drop_table("mcp_events")
