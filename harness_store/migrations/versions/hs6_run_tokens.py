"""harness_store 6: each run's total of `steps.tokens`, kept by triggers, for the Store's door.

io-harness sums a run's `steps.tokens` with SQLite's `SUM`, which fails past 2⁶³−1, so a step
that takes its run's total past that leaves a run no one can read the total of. The Store
refuses such a step before writing it (`harness_store.store.checkpoints`); to do that in one
index probe per write, however many steps the run has, this revision adds `hs_run_tokens`
(`harness_store.models.run_tokens`): a run's total, kept by triggers on `steps` (so rows
written by io-harness itself, or any other writer, count too). A total that would pass
2⁶³−1, or a step's tokens that are no integer of at least 0, makes it NULL (unknown: the door
then sums the run's steps) rather than failing the writer's statement or turning into REAL.

Additive and invisible to io-harness: its statements never name the table, and the triggers
never refuse a write. The downgrade drops the triggers and the table.

Revision ID: hs6
Revises: hs5
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from harness_store.dialects import backend_named
from harness_store.schema.migration_ops import create_table, drop_table

revision = "hs6"
down_revision = "hs5"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # imported here, not at the top: Alembic loads every revision even for a no-op upgrade
    from harness_store.models.run_tokens import RUN_TOKENS

    backend = backend_named(op.get_context().dialect.name)
    columns = [
        sa.Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable,
                  autoincrement=False)
        for c in RUN_TOKENS.columns
    ]  # fmt: skip
    create_table(RUN_TOKENS.name, *columns, autoincrement=False)
    op.execute(backend.run_tokens_backfill_sql())
    for statement in backend.run_tokens_triggers_sql():
        op.execute(statement)


def downgrade() -> None:
    from harness_store.models.run_tokens import RUN_TOKENS

    for statement in backend_named(op.get_context().dialect.name).drop_run_tokens_triggers_sql():
        op.execute(statement)
    drop_table(RUN_TOKENS.name)
