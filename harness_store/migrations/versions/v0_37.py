"""io-harness 0.37: a run's session turn kind; provider calls by run.

`runs.turn_kind` tells a session turn that replied from one that acted (NULL for runs that are
not turns), added by `ALTER TABLE`. `provider_calls` gains an index on `run_id`.

Releases 0.38 … 0.42 changed no schema: their names are this revision's branch labels, so
`alembic upgrade 0.42` lands here.

Revision ID: 0.37
Revises: 0.36
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import add_columns, create_index, drop_columns, drop_index
from harness_store.schema.release_labels import labels_for

revision = "0.37"
down_revision = "0.36"
branch_labels = labels_for(revision)
depends_on = None


def upgrade() -> None:
    add_columns(
        "runs",
        sa.Column("turn_kind", sa.Text()),
    )
    create_index("provider_calls_run", "provider_calls", ["run_id"])


def downgrade() -> None:
    drop_index("provider_calls_run", "provider_calls")
    drop_columns("runs", "turn_kind")
