"""harness_store 3: spend by model, day and run answered from counters kept by triggers.

Upstream prices every provider call on its own, with a table the caller brings (tiers on the
prompt length, rounding once per call), so a spend roll-up reads every call, and no sum of
tokens kept ahead of time gives the cost back exactly. This revision adds what does: triggers on
`provider_calls` (so rows written by io-harness itself count too) bump a counter per (day,
model) and per run on every insert, delete and usage update; the Store keeps each group's
priced answer with the counter it was computed at and prices again only the groups whose
counter moved (`harness_store.models.spend`). An index on `provider_calls(at)` finds one day's
calls for that, and the first, partial day of a `since` window.

Additive and invisible to io-harness: its statements never name these tables, and its updates
of `provider_calls` (0.58's archive empties `failure`) do not fire the update trigger. The
downgrade drops the triggers, the tables and the index; the Store then reads as before.

Revision ID: hs3
Revises: hs2
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from harness_store.dialects import backend_named
from harness_store.schema.migration_ops import create_index, create_table, drop_index, drop_table

revision = "hs3"
down_revision = "hs2"
branch_labels = None
depends_on = None

BACKFILL = (
    "INSERT INTO hs_spend_days (day, model, changes) "
    "SELECT substr(at, 1, 10), coalesce(model, '(unknown model)'), count(*) "
    "FROM provider_calls GROUP BY substr(at, 1, 10), coalesce(model, '(unknown model)')",
    "INSERT INTO hs_spend_runs (run_id, changes) "
    "SELECT run_id, count(*) FROM provider_calls GROUP BY run_id",
)


def upgrade() -> None:
    # imported here, not at the top: Alembic loads every revision even for a no-op upgrade,
    # which must not load the models
    from harness_store.models.spend import SPEND_AT_INDEX, SPEND_METADATA

    backend = backend_named(op.get_context().dialect.name)
    for table in SPEND_METADATA.sorted_tables:
        columns = [
            sa.Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable,
                      autoincrement=False)
            for c in table.columns
        ]  # fmt: skip
        create_table(table.name, *columns, autoincrement=False)
    create_index(*SPEND_AT_INDEX)
    for statement in BACKFILL:
        op.execute(statement)
    for statement in backend.spend_triggers_sql():
        op.execute(statement)


def downgrade() -> None:
    from harness_store.models.spend import SPEND_AT_INDEX, SPEND_TABLES

    for statement in backend_named(op.get_context().dialect.name).drop_spend_triggers_sql():
        op.execute(statement)
    for name in reversed(SPEND_TABLES):
        drop_table(name)
    drop_index(SPEND_AT_INDEX[0], SPEND_AT_INDEX[1])
