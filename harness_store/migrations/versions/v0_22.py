"""io-harness 0.22: citations and tools the provider ran on its own side.

When the provider searches or fetches the web, `citations` keeps the sources it said it used
and `server_tool_calls` what it ran, with an error column so a failed search differs from one
that found nothing.

Releases 0.23 … 0.24 changed no schema: their names are this revision's branch labels, so
`alembic upgrade 0.24` lands here.

Revision ID: 0.22
Revises: 0.21
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

revision = "0.22"
down_revision = "0.21"
branch_labels = labels_for(revision)
depends_on = None


def upgrade() -> None:
    create_table(
        "citations",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("title", sa.Text()),
        sa.Column("cited_text", sa.Text()),
        sa.Column("cited_at", sa.Text(), nullable=False, server_default=stamp_now()),
    )
    create_table(
        "server_tool_calls",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("provider", sa.Text(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("error", sa.Text()),
        sa.Column("ran_at", sa.Text(), nullable=False, server_default=stamp_now()),
    )
    create_index("citations_run", "citations", ["run_id", "step"])
    create_index("server_tool_calls_run", "server_tool_calls", ["run_id", "step"])


def downgrade() -> None:
    drop_index("server_tool_calls_run", "server_tool_calls")
    drop_index("citations_run", "citations")
    drop_table("server_tool_calls")
    drop_table("citations")
