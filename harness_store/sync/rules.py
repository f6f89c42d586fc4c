"""How each of the 37 io-harness tables is synced: how a change is found, which columns link
to other rows (and so are remapped), and how a central row is addressed.

Two kinds, from what upstream 0.66 does to each table after inserting a row:

- **append**: rows are only inserted, with AUTOINCREMENT ids (never reused). New rows are those
  above the origin's high-water mark. Upstream changes them only for a whole run at once —
  `delete_session`/`prune` delete every row of a run, `archive_session` empties a run's text
  columns (and the run's `goal`) — so a run gone from the source takes its rows with it
  centrally, and a run whose `goal` changed has its rows sent again.
- **state**: rows upstream updates in place or deletes (run status and outcome, resolved
  approvals, answered questions, decided plans, memory upserts and evictions, leases, session
  heads, read messages, process states, …), and the tables whose ids SQLite may reuse (no
  AUTOINCREMENT). The rows a pass reads (every row of a small table; of a big one those that
  may have changed, `finding`) are hashed; a new key is inserted, a changed hash updated, a
  key gone from the source deleted centrally.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["append", "state"]
KeyKind = Literal["id", "run", "rowid"]

RUNS, SESSIONS, TURNS = "runs", "sessions", "session_turns"


@dataclass(frozen=True)
class Rule:
    """How one table is synced."""

    table: str
    kind: Kind
    links: dict[str, str] = field(default_factory=dict)
    """Column → the table whose id it holds (`runs`, `sessions`, `session_turns`)."""
    key: KeyKind = "id"
    """`id`: a surrogate id the destination assigns; `run`: the primary key is the run's id;
    `rowid`: no id of its own (`step_turns`, keyed by run and step): tracked by SQLite rowid."""
    run_column: str | None = "run_id"
    """The column naming the run the row belongs to (None: not run-scoped)."""
    replace: bool = False
    """Change a row by deleting and inserting it (memory: its unique key may move)."""

    @property
    def referenced(self) -> bool:
        """Whether other rows link to this table's ids (so its id map is kept)."""
        return self.table in (RUNS, SESSIONS, TURNS)


def _append(table: str, run_column: str = "run_id", **links: str) -> Rule:
    return Rule(table, "append", {run_column: RUNS, **links}, run_column=run_column)


def _state(table: str, *, key: KeyKind = "id", replace: bool = False, **links: str) -> Rule:
    return Rule(table, "state", {"run_id": RUNS, **links}, key=key, replace=replace)


RULES: tuple[Rule, ...] = (
    # referenced first: links to them are resolved through their id maps
    Rule(RUNS, "state", {"parent_run_id": RUNS}, run_column=None),
    Rule(SESSIONS, "state", {"head_turn_id": TURNS}, run_column=None),
    _state(TURNS, session_id=SESSIONS, parent_turn_id=TURNS),
    # state: updated in place or deleted by upstream, or ids reused
    _state("run_outcomes", key="run"),
    _state("run_policies", key="run"),
    _state("run_leases", key="run"),
    _state("pending_approvals"),
    _state("pending_questions"),
    _state("plans"),
    _state("memory", replace=True),
    _state("memory_recalls"),
    _state("memory_snapshots"),
    _state("todos"),
    Rule("agent_queue", "state", {"parent_run_id": RUNS}, run_column="parent_run_id"),
    Rule(
        "agent_messages",
        "state",
        {"from_run_id": RUNS, "to_run_id": RUNS},
        run_column="to_run_id",
    ),
    _state("process_handles"),
    _state("context_events"),
    _state("ledger_observations"),
    _state("tool_attempts"),
    _state("step_turns", key="rowid", replace=True),
    # append: inserted only (AUTOINCREMENT), changed only a whole run at a time
    _append("steps"),
    _append("policy_events"),
    _append("agent_events", child_run_id=RUNS),
    _append("sandbox_events"),
    _append("checkpoint_events"),
    _append("spawns", "parent_run_id", child_run_id=RUNS),
    _append("mcp_events"),
    _append("provider_calls"),
    _append("edits"),
    _append("citations"),
    _append("server_tool_calls"),
    _append("handle_output"),
    _append("snapshots"),
    _append("run_events"),
    _append("gate_attempts"),
    _append("rewinds"),
    _append("summaries"),
)
"""Every table, in the order a sync writes them."""

RULE_OF = {rule.table: rule for rule in RULES}
