"""io-harness 0.4: policy refusals and decisions, and actions awaiting a human.

`policy_events` records what the policy refused or a person decided (never file contents);
`pending_approvals` keeps a deferred action's payload so a resume replays exactly what was
approved, even after the requesting process is gone.

Revision ID: 0.4
Revises: 0.3
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import INT, create_table, drop_table, id_column

revision = "0.4"
down_revision = "0.3"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "policy_events",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("act", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("rule", sa.Text()),
        sa.Column("layer", sa.Text()),
        sa.Column("decision", sa.Text()),
        sa.Column("source", sa.Text()),
        sa.Column("performed", sa.Text()),
    )
    create_table(
        "pending_approvals",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("act", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("content", sa.Text()),
        sa.Column("resolved", sa.Text()),
    )


def downgrade() -> None:
    drop_table("pending_approvals")
    drop_table("policy_events")
