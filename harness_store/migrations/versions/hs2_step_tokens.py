"""harness_store 2: the per-run index of steps covers `tokens`, so a run's totals come from
the index alone.

`harness-store runs` and `tree`, and the Store's token sums (`spent_tokens`, `tree`,
`spent_tokens_tree`), add up `steps.tokens` of a run. Through `hs1`'s `steps(run_id, step)`
each step meant a lookup of its row in the table, whose rows carry the prompt and the tool
call: for a million-step run, reading the whole run from the table. `steps(run_id, step, id,
tokens)` answers those sums from the index and serves every read the narrower index served,
in the same order, so that one is dropped: a step write still updates one harness_store index
on `steps`. `id` comes before `tokens` so that a step's retries (rows sharing a step number)
stay in id order for upstream's `ORDER BY step` reads, as they came through `hs1`'s index and
come without one; ordered by tokens, io-harness would read them in another order.

Like `hs1`, additive and invisible to io-harness (no release has an index on `steps`). A store
stamped at an upstream release after 0.13 never ran `hs1` and gets its first index on `steps`
here. The downgrade puts `hs1`'s index back.

Revision ID: hs2
Revises: 0.65
"""

from __future__ import annotations

from harness_store.schema.migration_ops import create_index, drop_index

revision = "hs2"
down_revision = "0.65"
branch_labels = None
depends_on = None

COVERING = ("hs_steps_run_id_step_id_tokens", "steps", ["run_id", "step", "id", "tokens"])
NARROW = ("hs_steps_run_id_step", "steps", ["run_id", "step"])


def upgrade() -> None:
    create_index(*COVERING)
    drop_index(NARROW[0], NARROW[1])


def downgrade() -> None:
    create_index(*NARROW)
    drop_index(COVERING[0], COVERING[1])
