"""Where each public `Store` method runs in an `AsyncStore`: the sets the facade is built from.

Every public method of `Store` is placed in exactly one set. READS may run on a SQLite store's
read-only twin (so they never queue behind writes); a write put there would fail with
`StoreAccessError`, so a method is a read only when it never writes. A public method placed
nowhere is mirrored as a write (safe, if slower for a read), so a method added to `Store`
later still gets its coroutine twin; `tests/test_async_store.py` asks that it be placed.
"""

from __future__ import annotations

import inspect

READS = frozenset(
    {
        "arrow",
        "frame",
        "iter_arrow",
        "check",
        "span_event_rows",
        "span_mcp_events",
        "span_provider_calls",
        "span_run",
        "span_runs",
        "span_server_tool_calls",
        "span_steps",
        "span_tool_attempts",
        "agent_count_tree",
        "agent_events",
        "answered_question",
        "approved_plan",
        "canonical_trace",
        "check_resumable",
        "checkpoint_events",
        "children",
        "citations",
        "context_events",
        "depth",
        "edits",
        "elapsed_secs",
        "event_cursor",
        "events",
        "events_after",
        "events_since",
        "tree_events_since",
        "find_spawn",
        "first_try",
        "gate_attempts",
        "gate_failures_by_phase",
        "handle_output",
        "last_gate_attempt",
        "last_run",
        "last_step",
        "mcp_events",
        "memory_get",
        "memory_list",
        "memory_recalls",
        "memory_similar",
        "memory_snapshots",
        "messages_for",
        "observations",
        "open_attempts",
        "outcome",
        "parent",
        "patch",
        "pending",
        "pending_for_run",
        "plan",
        "plans",
        "process_handles",
        "provider",
        "provider_calls",
        "question",
        "questions",
        "recovery",
        "queued_agents",
        "rewinds",
        "run_lease",
        "run_policy",
        "run_root",
        "run_status",
        "run_summary",
        "runs",
        "runs_by_day",
        "runs_by_outcome",
        "sandbox_events",
        "server_tool_calls",
        "session_head",
        "session_root",
        "session_size",
        "session_turn",
        "session_turns",
        "snapshot",
        "snapshot_paths",
        "spend_by_day",
        "spend_by_model",
        "spend_by_run",
        "iter_spend_by_run",
        "spent_tokens",
        "spent_tokens_tree",
        "step_turns",
        "steps",
        "status",
        "store_size",
        "summaries",
        "summary_for",
        "sweep_candidates",
        "todos",
        "tree",
        "tree_addresses",
        "tree_run_ids",
        "turn_for_run",
        "unresolved_approvals",
    }
)
"""Methods that only read."""

WRITES = frozenset(
    {
        "repair",
        "prune_runs",
        "sweep_session",
        "acquire_lease",
        "answer_question",
        "archive_session",
        "checkpoint_step",
        "checkpoint_steps",
        "close_attempt",
        "compact",
        "create_session",
        "decide_plan",
        "delete_session",
        "dequeue_agent",
        "enqueue_agent",
        "finish_run",
        "finish_turn",
        "forget_staged_turn",
        "memory_clear",
        "memory_delete",
        "memory_forget",
        "memory_pin",
        "memory_put",
        "memory_write",
        "memory_write_with",
        "open_attempt",
        "orphan_live_handles",
        "put_event",
        "put_gate_attempt",
        "put_pending",
        "put_plan",
        "put_question",
        "put_summary",
        "read_messages",
        "record",
        "record_agent_event",
        "record_checkpoint_event",
        "record_citations",
        "record_context_event",
        "record_context_reported",
        "record_edit",
        "record_event",
        "record_handle_ended",
        "record_handle_output",
        "record_handle_pids",
        "record_handle_started",
        "record_mcp",
        "record_memory_recall",
        "record_observations",
        "record_provider_call",
        "record_rewind",
        "record_run_policy",
        "record_sandbox_event",
        "record_server_tool_calls",
        "record_snapshot",
        "record_spawn",
        "record_step_turn",
        "record_turn",
        "release_lease",
        "renew_lease",
        "resolve_attempt",
        "resolve_pending",
        "send_message",
        "set_provider",
        "set_session_head",
        "set_session_head_if",
        "set_status",
        "stage_step_turn",
        "start_child_run",
        "start_run",
        "sweep_sessions",
        "write_todos",
    }
)
"""Methods that write (or may): on the Store itself, batched by group commit on SQLite."""

LOCAL = frozenset({"owner"})
"""Methods that touch no database: run in place, no hop."""

ITERATORS: dict[str, str | int | None] = {
    "iter_steps": "page",
    "iter_spend_by_run": 1000,
    "iter_arrow": "batch_rows",
    "follow": None,
}
"""Generators, mirrored as async iterators: the argument giving how many items one hop pulls
(the generator's own page), a fixed number of them, or None for one the facade implements
natively (`follow` polls with `asyncio.sleep`, holding no thread while it waits)."""

NOT_MIRRORED = frozenset({"open", "memory", "close", "transaction"})
"""Written by hand on `AsyncStore`: the constructors (coroutine classmethods), `close`, and
`transaction` (an async context manager)."""

PROPERTIES = frozenset({"backend", "engine", "write_engine", "upgrade_report"})
"""Attributes read straight off the Store (no I/O)."""

READ = "read"
WRITE = "write"
MAINTENANCE = "maintenance"
"""A write that must run outside any transaction (`compact`): never committed together."""


def public_methods(cls: type) -> set[str]:
    """The public callables of `cls` (methods and classmethods, not properties)."""
    names = set()
    for name in dir(cls):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(cls, name)
        if isinstance(attr, property) or name in PROPERTIES:
            continue
        if callable(getattr(cls, name)):
            names.add(name)
    return names


def kind_of(name: str) -> str:
    """READ for a method in READS (or an iterator over reads), else WRITE: an unplaced method
    is a write."""
    if name == "compact":
        return MAINTENANCE
    return READ if name in READS or name == "iter_steps" else WRITE


def unplaced(cls: type) -> set[str]:
    """Public methods of `cls` in no set (mirrored as writes until someone places them)."""
    placed = READS | WRITES | LOCAL | set(ITERATORS) | NOT_MIRRORED
    return public_methods(cls) - placed
