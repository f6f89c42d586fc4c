"""harness_store 7: each run's total of `provider_calls.total_tokens`, kept by triggers, for
the Store's provider-call door.

The Store refuses a provider call whose `total_tokens` would take its run's sum of them past
2⁶³−1 (io-harness's `SUM` in `spent_tokens` could not read it back;
`harness_store.store.accounting`). Summing the run's calls for that made each write cost more
the more calls its run had; this revision adds `hs_run_call_tokens`
(`harness_store.models.run_tokens`, beside hs6's steps totals, and kept by the same triggers'
rules on `provider_calls`), so the door reads one row whoever wrote the calls. NULL is unknown
(a sum past 2⁶³−1, or a foreign writer's value that is no integer of at least 0): the door then
sums the run's calls.

Additive and invisible to io-harness: its statements never name the table, and the triggers
never refuse a write. The downgrade drops the triggers and the table.

Revision ID: hs7
Revises: hs6
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from harness_store.dialects import backend_named
from harness_store.schema.migration_ops import create_table, drop_table

revision = "hs7"
down_revision = "hs6"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # imported here, not at the top: Alembic loads every revision even for a no-op upgrade
    from harness_store.models.run_tokens import RUN_CALL_TOKENS

    backend = backend_named(op.get_context().dialect.name)
    columns = [
        sa.Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable,
                  autoincrement=False)
        for c in RUN_CALL_TOKENS.columns
    ]  # fmt: skip
    create_table(RUN_CALL_TOKENS.name, *columns, autoincrement=False)
    op.execute(backend.call_tokens_backfill_sql())
    for statement in backend.call_tokens_triggers_sql():
        op.execute(statement)


def downgrade() -> None:
    from harness_store.models.run_tokens import RUN_CALL_TOKENS

    for statement in backend_named(op.get_context().dialect.name).drop_call_tokens_triggers_sql():
        op.execute(statement)
    drop_table(RUN_CALL_TOKENS.name)
