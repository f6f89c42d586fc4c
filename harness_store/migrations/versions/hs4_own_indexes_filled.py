"""harness_store 4: every `hs_` index the shape below holds, on stores that never got one.

io-harness creates none of harness_store's indexes, and an io-harness store is stamped at the
release its shape matches before the chain runs. A store of 0.18 or later is stamped above
`hs1`, so it never ran it: upgraded, it lacked nine of the indexes a new store has
(`hs_runs_parent_run_id`, `hs_spawns_parent_run_id_step` and the seven `hs_…_run_id`), and tree
aggregates and per-run reads scanned whole tables. This revision creates, each only where it is
missing, every index `harness_store.releases.own_indexes_at("hs3")` names, so every
path to the head — a new store, one walked up the chain, one detected at any release, torn,
or taken down and up again — ends with the same indexes.

The downgrade drops nothing: these indexes belong to the revisions below (`hs1`, `hs2`,
`hs3`), which is where a store walked up the chain got them, so a store taken down to `hs3`
keeps them as such a store holds them; each revision below drops its own on the way down.

Revision ID: hs4
Revises: hs3
"""

from __future__ import annotations

from harness_store.releases import OWN_SPEND, own_indexes_at
from harness_store.schema.migration_ops import create_index

revision = "hs4"
down_revision = "hs3"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for name, index in own_indexes_at(OWN_SPEND).items():
        create_index(
            name,
            index.table,
            list(index.columns),
            unique=index.unique,
            where=index.where,
        )


def downgrade() -> None:
    """Nothing to undo: the indexes this revision may have created are those the revisions
    below it hold (see the module docstring)."""
