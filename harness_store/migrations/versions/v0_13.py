"""io-harness 0.13: recorded run policies and the durable observation ledger.

`run_policies` keeps the policy (as JSON) a run was started under, so a resume knows the
boundary instead of guessing — no row means nobody recorded one, never "permissive".
`ledger_observations` keeps each observation's (step, kind, target, text) in order, so a resumed
run restores the context it had.

Revision ID: 0.13
Revises: 0.12
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import INT, create_table, drop_table, id_column

revision = "0.13"
down_revision = "0.12"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "run_policies",
        sa.Column("run_id", INT, primary_key=True, nullable=True, autoincrement=False),
        sa.Column("policy", sa.Text(), nullable=False),
        autoincrement=False,
    )
    create_table(
        "ledger_observations",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("target", sa.Text()),
        sa.Column("text", sa.Text(), nullable=False),
        autoincrement=False,
    )


def downgrade() -> None:
    drop_table("ledger_observations")
    drop_table("run_policies")
