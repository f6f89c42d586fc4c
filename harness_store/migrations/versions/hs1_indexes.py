"""harness_store 1: indexes upstream lacks, for tree aggregates and per-run reads.

Upstream has no index but primary keys and memory's UNIQUE, so its recursive tree queries scan
`runs` once per level and every per-run read scans its table. These indexes are harness_store's
own: named `hs_…`, additive, invisible to io-harness (whose opens only create what is missing),
and dropped again by a downgrade to 0.13. Where a later release brings an index of its own that
makes one of these redundant, that release's revision drops ours (0.30:
`hs_sandbox_events_run_id`).

Releases 0.14 … 0.17 changed no schema: their names are this revision's branch labels, so
`alembic upgrade 0.17` lands here.

Revision ID: hs1
Revises: 0.13
"""

from __future__ import annotations

from harness_store.releases import OWN_INDEXES, OWN_INDEXES_ADDED
from harness_store.schema.migration_ops import create_index, drop_index
from harness_store.schema.release_labels import labels_for

revision = "hs1"
down_revision = "0.13"
branch_labels = labels_for(revision)
depends_on = None

INDEXES: tuple[tuple[str, str, list[str]], ...] = tuple(
    (name, index.table, list(index.columns))
    for name, index in OWN_INDEXES_ADDED[OWN_INDEXES].items()
)
"""The indexes, as `harness_store.releases.OWN_INDEXES_ADDED` holds them."""


def upgrade() -> None:
    for name, table, columns in INDEXES:
        create_index(name, table, columns)


def downgrade() -> None:
    for name, table, _ in reversed(INDEXES):
        drop_index(name, table)
