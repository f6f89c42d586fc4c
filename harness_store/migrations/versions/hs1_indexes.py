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

from harness_store.schema.migration_ops import create_index, drop_index

revision = "hs1"
down_revision = "0.13"
branch_labels = ("0.14", "0.15", "0.16", "0.17")
depends_on = None

INDEXES: tuple[tuple[str, str, list[str]], ...] = (
    ("hs_runs_parent_run_id", "runs", ["parent_run_id"]),
    ("hs_steps_run_id_step", "steps", ["run_id", "step"]),
    ("hs_policy_events_run_id", "policy_events", ["run_id"]),
    ("hs_pending_approvals_run_id", "pending_approvals", ["run_id"]),
    ("hs_agent_events_run_id", "agent_events", ["run_id"]),
    ("hs_sandbox_events_run_id", "sandbox_events", ["run_id"]),
    ("hs_checkpoint_events_run_id", "checkpoint_events", ["run_id"]),
    ("hs_spawns_parent_run_id_step", "spawns", ["parent_run_id", "step"]),
    ("hs_mcp_events_run_id", "mcp_events", ["run_id"]),
    ("hs_context_events_run_id", "context_events", ["run_id"]),
    ("hs_ledger_observations_run_id", "ledger_observations", ["run_id"]),
)


def upgrade() -> None:
    for name, table, columns in INDEXES:
        create_index(name, table, columns)


def downgrade() -> None:
    for name, table, _ in reversed(INDEXES):
        drop_index(name, table)
