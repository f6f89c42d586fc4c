"""io-harness 0.18: what each provider call cost, and the files a run edited.

Every call or retry to a model provider becomes a `provider_calls` row: tokens by kind (prompt,
completion, cache reads and writes, reasoning), server-side tool requests, latency and time to
first token, the finish reason or failure. Prices are applied when reading, so no cost is
stored. `edits` counts the lines each file edit added and removed.

Release 0.19 changed no schema: its name is this revision's branch label, so `alembic upgrade
0.19` lands here.

Revision ID: 0.18
Revises: hs1
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import INT, create_table, drop_table, id_column
from harness_store.schema.release_labels import labels_for
from harness_store.sqldefaults import datetime_now

revision = "0.18"
down_revision = "hs1"
branch_labels = labels_for(revision)
depends_on = None


def upgrade() -> None:
    create_table(
        "provider_calls",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("attempt", INT, nullable=False),
        sa.Column("provider", sa.Text(), nullable=False),
        sa.Column("model", sa.Text()),
        sa.Column("prompt_tokens", INT),
        sa.Column("completion_tokens", INT),
        sa.Column("total_tokens", INT),
        sa.Column("cache_read_tokens", INT),
        sa.Column("cache_write_tokens", INT),
        sa.Column("reasoning_tokens", INT),
        sa.Column("server_tool_requests", INT),
        sa.Column("latency_ms", INT, nullable=False),
        sa.Column("ttft_ms", INT),
        sa.Column("finish_reason", sa.Text()),
        sa.Column("failure", sa.Text()),
        sa.Column("at", sa.Text(), nullable=False, server_default=datetime_now()),
    )
    create_table(
        "edits",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("lines_added", INT, nullable=False),
        sa.Column("lines_removed", INT, nullable=False),
        sa.Column("at", sa.Text(), nullable=False, server_default=datetime_now()),
    )


def downgrade() -> None:
    drop_table("edits")
    drop_table("provider_calls")
