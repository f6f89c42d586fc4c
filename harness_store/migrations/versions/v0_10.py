"""io-harness 0.10: cross-run memory and context-assembly events.

`memory` holds facts an agent wrote deliberately, keyed to a workspace (not a run) so a later
run recalls them; UNIQUE(workspace, key), ids without AUTOINCREMENT, as upstream. Each
`context_events` row is one assembler decision (a turn's section, or a re-read), with the
estimate beside the provider's reported count so drift is readable.

Revision ID: 0.10
Revises: 0.9
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import INT, create_table, drop_table, id_column

revision = "0.10"
down_revision = "0.9"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "memory",
        id_column(),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("created_at", sa.Text(), nullable=False),
        sa.UniqueConstraint("workspace", "key"),  # type: ignore[arg-type]  # a SchemaItem, as Alembic accepts
        autoincrement=False,
    )
    create_table(
        "context_events",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text()),
        sa.Column("est_tokens", INT),
        sa.Column("reported_tokens", INT),
        autoincrement=False,
    )


def downgrade() -> None:
    drop_table("context_events")
    drop_table("memory")
