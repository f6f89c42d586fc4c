"""harness_store 5: typed times for analysts on PostgreSQL.

upstream's stamps are TEXT in two spellings, which `pandas.read_sql` and dashboards read as
strings. On PostgreSQL this revision creates `hs_stamp(text) → timestamptz` and, for each
table that holds a stamp, a view `<table>_times`: the table's columns, each stamp as its
instant (`harness_store.dialects.postgresql_times`). On SQLite it does nothing: upstream opens
SQLite stores, and they keep exactly the shape it gives them. The tables are not touched, so
the shape this revision holds is `hs4`'s; `alembic check` compares tables only.

The downgrade drops the views and the function, so every revision below this one meets the
tables alone (a view over a column would block dropping that column).

Revision ID: hs5
Revises: hs4
"""

from __future__ import annotations

from harness_store.releases import OWN_TYPED_TIMES, SHAPES, release_of_revision
from harness_store.schema.migration_ops import create_times_views, drop_times_views

revision = "hs5"
down_revision = "hs4"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_times_views(SHAPES[release_of_revision(OWN_TYPED_TIMES)])


def downgrade() -> None:
    drop_times_views()
