"""The upstream releases harness_store knows, and the shape each one leaves a store in.

A shape is what a release's open guarantees once it has run to the end: the tables, their
columns, upstream's own indexes (from 0.21), and (from 0.7) `user_version` stamped to 7.
Shapes are cumulative and purely additive. Each release that changed the schema has an Alembic
revision named after it ("0.1" … "0.13", "0.18" … "0.65"); harness_store's own indexes are
revisions `hs1`, between 0.13 and 0.18, and `hs2` … `hs7` after 0.65 (hs3: spend
counters kept by triggers, `harness_store.models.spend`; hs4: every `hs_` index a
store stamped at an upstream release never got, see `own_indexes_at`; hs5: typed-times
views on PostgreSQL, `harness_store.dialects.postgresql_times`; hs6: each run's
token total kept by triggers, `harness_store.models.run_tokens`; hs7, the head: each run's
total of its provider calls' tokens, likewise). Every other release
name resolves to the newest release revision at or below it (`revision_for`): 0.29 changed
nothing, so `alembic upgrade 0.29` lands on 0.28, and 0.66 on 0.65.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .formats import CHECKPOINT_FORMAT


@dataclass(frozen=True)
class UpstreamIndex:
    """An index upstream's open creates (or one of harness_store's `hs_` indexes,
    `OWN_INDEXES_ADDED`): its table, columns, uniqueness and partial WHERE."""

    table: str
    columns: tuple[str, ...]
    unique: bool = False
    where: str | None = None


@dataclass(frozen=True)
class Release:
    """One upstream release's schema change: tables created, columns added, marker stamped."""

    name: str
    new_tables: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    new_columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    new_indexes: Mapping[str, UpstreamIndex] = field(default_factory=dict)
    stamps_format: bool = False
    summary: str = ""
    drops_own: tuple[str, ...] = ()
    """harness_store's `hs_` indexes this release's indexes make redundant (its revision drops
    them; the downgrade puts them back)."""


RELEASES: tuple[Release, ...] = (
    Release(
        "0.1",
        new_tables={
            "runs": ("id", "goal", "file", "outcome"),
            "steps": ("id", "run_id", "step", "decision", "result"),
        },
        summary="runs and steps",
    ),
    Release(
        "0.2",
        new_columns={"steps": ("prompt", "tool_call", "tokens")},
        summary="the full step trace: prompt, tool call, tokens",
    ),
    Release("0.3", new_columns={"runs": ("provider",)}, summary="which provider ran a run"),
    Release(
        "0.4",
        new_tables={
            "policy_events": (
                "id",
                "run_id",
                "step",
                "kind",
                "act",
                "target",
                "rule",
                "layer",
                "decision",
                "source",
                "performed",
            ),
            "pending_approvals": (
                "id",
                "run_id",
                "step",
                "act",
                "target",
                "content",
                "resolved",
            ),
        },
        summary="policy refusals and decisions; actions awaiting approval",
    ),
    Release(
        "0.5",
        new_columns={"runs": ("parent_run_id", "depth")},
        new_tables={
            "agent_events": (
                "id",
                "run_id",
                "step",
                "kind",
                "child_run_id",
                "detail",
                "tokens",
                "remaining",
            ),
        },
        summary="sub-agent trees",
    ),
    Release(
        "0.6",
        new_tables={"sandbox_events": ("id", "run_id", "step", "kind", "backend", "detail")},
        summary="sandbox lifecycle events",
    ),
    Release(
        "0.7",
        new_columns={"runs": ("status", "started_at")},
        new_tables={
            "checkpoint_events": ("id", "run_id", "step", "kind", "detail"),
            "spawns": (
                "id",
                "parent_run_id",
                "step",
                "child_run_id",
                "goal",
                "verify_file",
                "needle",
                "max_steps",
                "deny_write",
            ),
        },
        stamps_format=True,
        summary="durable checkpoints and resume; user_version 7",
    ),
    Release(
        "0.8",
        new_tables={
            "mcp_events": (
                "id",
                "run_id",
                "step",
                "kind",
                "server",
                "tool",
                "ok",
                "millis",
                "detail",
            ),
        },
        summary="MCP events",
    ),
    Release("0.9", summary="no schema change"),
    Release(
        "0.10",
        new_tables={
            "memory": ("id", "workspace", "key", "value", "run_id", "step", "created_at"),
            "context_events": (
                "id",
                "run_id",
                "step",
                "kind",
                "detail",
                "est_tokens",
                "reported_tokens",
            ),
        },
        summary="cross-run memory; context-assembly events",
    ),
    Release("0.11", summary="no schema change"),
    Release(
        "0.12",
        new_tables={
            "run_outcomes": (
                "run_id",
                "outcome",
                "success",
                "steps",
                "tokens",
                "duration_ms",
                "finished_at",
            ),
        },
        summary="run summaries; file stores switched to WAL",
    ),
    Release(
        "0.13",
        new_tables={
            "run_policies": ("run_id", "policy"),
            "ledger_observations": ("id", "run_id", "step", "kind", "target", "text"),
        },
        summary="recorded run policies; the durable observation ledger",
    ),
    Release(
        "0.18",
        new_tables={
            "provider_calls": (
                "id", "run_id", "step", "attempt", "provider", "model", "prompt_tokens",
                "completion_tokens", "total_tokens", "cache_read_tokens", "cache_write_tokens",
                "reasoning_tokens", "server_tool_requests", "latency_ms", "ttft_ms",
                "finish_reason", "failure", "at",
            ),
            "edits": (
                "id", "run_id", "step", "tool", "path", "lines_added", "lines_removed", "at",
            ),
        },
        summary="provider calls with usage and latency; file edits",
    ),
    Release(
        "0.20",
        new_tables={
            "sessions": ("id", "root", "head_turn_id", "created_at"),
            "session_turns": (
                "id", "session_id", "parent_turn_id", "run_id", "prompt", "reply", "outcome",
                "created_at",
            ),
        },
        summary="conversational sessions and their turns",
    ),
    Release(
        "0.21",
        new_tables={
            "todos": ("id", "run_id", "position", "text", "state", "written_at"),
            "pending_questions": (
                "id", "run_id", "step", "question", "context", "choices", "answer",
                "answered_by", "resolved", "asked_at",
            ),
        },
        new_indexes={"todos_run": UpstreamIndex("todos", ("run_id", "position"))},
        summary="a run's todo list; questions to a person",
    ),
    Release(
        "0.22",
        new_tables={
            "citations": ("id", "run_id", "step", "url", "title", "cited_text", "cited_at"),
            "server_tool_calls": ("id", "run_id", "step", "provider", "tool", "error", "ran_at"),
        },
        new_indexes={
            "citations_run": UpstreamIndex("citations", ("run_id", "step")),
            "server_tool_calls_run": UpstreamIndex("server_tool_calls", ("run_id", "step")),
        },
        summary="web citations; provider-side tool calls",
    ),
    Release(
        "0.25",
        new_tables={
            "process_handles": (
                "id", "run_id", "handle", "step", "line", "pids", "state", "code", "reason",
                "started_at", "ended_at",
            ),
            "handle_output": ("id", "run_id", "handle", "step", "chunk", "read_at"),
        },
        new_indexes={
            "process_handles_run": UpstreamIndex(
                "process_handles", ("run_id", "handle"), unique=True
            ),
            "handle_output_run": UpstreamIndex("handle_output", ("run_id", "handle")),
        },
        summary="background processes and their output",
    ),
    Release(
        "0.28",
        new_tables={"snapshots": ("id", "run_id", "step", "path", "before", "state", "at")},
        new_indexes={"snapshots_run": UpstreamIndex("snapshots", ("run_id", "path"))},
        summary="file snapshots before a run's first change",
    ),
    Release(
        "0.30",
        new_columns={"memory": ("kind", "pinned")},
        new_tables={
            "memory_recalls": ("id", "run_id", "step", "workspace", "key", "at"),
        },
        new_indexes={
            "memory_recalls_run": UpstreamIndex("memory_recalls", ("run_id",)),
            "run_outcomes_outcome": UpstreamIndex("run_outcomes", ("outcome",)),
            "run_outcomes_finished": UpstreamIndex("run_outcomes", ("finished_at",)),
            "sandbox_events_kind_detail": UpstreamIndex("sandbox_events", ("kind", "detail")),
            "sandbox_events_run_kind": UpstreamIndex("sandbox_events", ("run_id", "kind")),
            "context_events_kind": UpstreamIndex("context_events", ("kind",)),
            "checkpoint_events_kind": UpstreamIndex("checkpoint_events", ("kind",)),
        },
        drops_own=("hs_sandbox_events_run_id",),
        summary="memory kinds, pins and recalls; indexes for the roll-ups",
    ),
    Release(
        "0.31",
        new_tables={
            "plans": (
                "id", "run_id", "step", "steps", "verdict", "correction", "decided_by",
                "resolved", "proposed_at",
            ),
        },
        new_indexes={"plans_run": UpstreamIndex("plans", ("run_id", "verdict"))},
        summary="plans proposed for approval",
    ),
    Release(
        "0.32",
        new_tables={
            "agent_queue": ("id", "parent_run_id", "step", "goal", "depth", "queued_at"),
        },
        new_indexes={
            "agent_queue_entry": UpstreamIndex(
                "agent_queue", ("parent_run_id", "step", "goal"), unique=True
            ),
        },
        summary="the queue of children waiting to spawn",
    ),
    Release(
        "0.33",
        new_tables={"run_events": ("id", "run_id", "step", "depth", "kind", "json", "at")},
        new_indexes={"run_events_run": UpstreamIndex("run_events", ("run_id", "id"))},
        summary="the run event stream",
    ),
    Release(
        "0.34",
        new_tables={
            "gate_attempts": ("id", "run_id", "step", "phase", "outcome", "detail", "at"),
        },
        new_indexes={"gate_attempts_run": UpstreamIndex("gate_attempts", ("run_id", "id"))},
        summary="verification gate attempts",
    ),
    Release(
        "0.36",
        new_tables={
            "memory_snapshots": (
                "id", "run_id", "workspace", "key", "step", "before", "kind", "state", "at",
            ),
            "rewinds": (
                "id", "run_id", "files", "memory_restored", "memory_removed", "queue_cleared",
                "at",
            ),
        },
        new_indexes={
            "memory_snapshots_entry": UpstreamIndex(
                "memory_snapshots", ("run_id", "workspace", "key"), unique=True
            ),
            "rewinds_run": UpstreamIndex("rewinds", ("run_id", "id")),
        },
        summary="rewinds and the memory snapshots they restore",
    ),
    Release(
        "0.37",
        new_columns={"runs": ("turn_kind",)},
        new_indexes={"provider_calls_run": UpstreamIndex("provider_calls", ("run_id",))},
        summary="a run's session turn kind; provider calls by run",
    ),
    Release(
        "0.43",
        new_tables={
            "summaries": ("id", "run_id", "through_step", "folded", "text", "est_tokens", "at"),
        },
        new_indexes={"summaries_run": UpstreamIndex("summaries", ("run_id", "folded"))},
        summary="folded history summaries",
    ),
    Release(
        "0.51",
        new_columns={"edits": ("hunk",), "rewinds": ("undid_step",)},
        summary="an edit's diff hunk; the step a rewind undid",
    ),
    Release(
        "0.56",
        new_indexes={
            "memory_recalls_entry": UpstreamIndex("memory_recalls", ("workspace", "key")),
        },
        summary="recalls by memory entry (eviction ranks by recalls)",
    ),
    Release(
        "0.58",
        new_indexes={
            "session_turns_session": UpstreamIndex("session_turns", ("session_id",)),
        },
        summary="session turns by session",
    ),
    Release(
        "0.60",
        new_columns={"spawns": ("as_name",)},
        new_tables={
            "agent_messages": (
                "id", "from_run_id", "to_run_id", "from_name", "step", "body", "sent_at",
                "read_at",
            ),
        },
        new_indexes={"agent_messages_to": UpstreamIndex("agent_messages", ("to_run_id", "id"))},
        summary="messages between agents; spawn names",
    ),
    Release(
        "0.62",
        new_tables={
            "run_leases": (
                "run_id", "owner", "generation", "acquired_at", "renewed_at", "ttl_secs",
            ),
        },
        summary="run leases",
    ),
    Release(
        "0.64",
        new_tables={"step_turns": ("run_id", "step", "text", "calls")},
        summary="assistant turns staged with their step",
    ),
    Release(
        "0.65",
        new_tables={
            "tool_attempts": (
                "id", "run_id", "step", "tool", "started_at", "completed_at", "resolution",
            ),
        },
        new_indexes={
            "tool_attempts_open": UpstreamIndex(
                "tool_attempts", ("run_id",), where="completed_at IS NULL"
            ),
        },
        summary="tool attempts, open until resolved",
    ),
)  # fmt: skip

RELEASE_NAMES: tuple[str, ...] = tuple(r.name for r in RELEASES)
"""Every release that changed the schema, oldest first; each is an Alembic revision."""

UPSTREAM_HEAD = RELEASE_NAMES[-1]
"""The newest upstream release that changed the schema (the head revision)."""

NEWEST_KNOWN_RELEASE = "0.66"
"""The newest upstream release this package was checked against (its shape is 0.65's)."""

STORE_RELEASE = "0.13"
"""The release whose schema the `Store`'s methods, the CLI's reads and `copy` rely on."""

OWN_INDEXES = "hs1"
"""The revision of harness_store's own indexes, right after 0.13."""

OWN_STEP_TOKENS = "hs2"
"""The revision that widens hs1's index of steps to cover `tokens`, right after 0.65."""

OWN_SPEND = "hs3"
"""The revision of the spend counters (tables and triggers on `provider_calls`), after hs2."""

OWN_INDEXES_FILLED = "hs4"
"""The revision that creates every `hs_` index of the shape below it that a store lacks (one
stamped at an upstream release after 0.13 never ran `hs1`), after hs3."""

OWN_TYPED_TIMES = "hs5"
"""The revision of the typed-times views on PostgreSQL (`<table>_times`, no change on SQLite),
after hs4."""

OWN_RUN_TOKENS = "hs6"
"""The revision of each run's token total (a table and triggers on `steps`), read by the
Store's door on every step write, after hs5."""

OWN_CALL_TOKENS = "hs7"
"""The revision of each run's total of its provider calls' tokens (a table and triggers on
`provider_calls`), read by the Store's door on every call write, after hs6."""

OWN_REVISIONS: Mapping[str, str] = MappingProxyType(
    {
        OWN_INDEXES: STORE_RELEASE,
        OWN_STEP_TOKENS: UPSTREAM_HEAD,
        OWN_SPEND: UPSTREAM_HEAD,
        OWN_INDEXES_FILLED: UPSTREAM_HEAD,
        OWN_TYPED_TIMES: UPSTREAM_HEAD,
        OWN_RUN_TOKENS: UPSTREAM_HEAD,
        OWN_CALL_TOKENS: UPSTREAM_HEAD,
    }
)
"""harness_store's own revisions, each with the release it follows (whose shape it holds)."""

HEAD = OWN_CALL_TOKENS
"""The head Alembic revision: the newest release's shape plus harness_store's indexes, spend
counters, (on PostgreSQL) typed-times views and run token totals (of steps and of calls)."""

REVISIONS: tuple[str, ...] = (
    *RELEASE_NAMES[: RELEASE_NAMES.index("0.13") + 1],
    OWN_INDEXES,
    *RELEASE_NAMES[RELEASE_NAMES.index("0.13") + 1 :],
    OWN_STEP_TOKENS,
    OWN_SPEND,
    OWN_INDEXES_FILLED,
    OWN_TYPED_TIMES,
    OWN_RUN_TOKENS,
    OWN_CALL_TOKENS,
)
"""Every revision of the chain, oldest first."""

OWN_INDEXES_ADDED: Mapping[str, Mapping[str, UpstreamIndex]] = MappingProxyType(
    {
        OWN_INDEXES: MappingProxyType(
            {
                "hs_runs_parent_run_id": UpstreamIndex("runs", ("parent_run_id",)),
                "hs_steps_run_id_step": UpstreamIndex("steps", ("run_id", "step")),
                "hs_policy_events_run_id": UpstreamIndex("policy_events", ("run_id",)),
                "hs_pending_approvals_run_id": UpstreamIndex("pending_approvals", ("run_id",)),
                "hs_agent_events_run_id": UpstreamIndex("agent_events", ("run_id",)),
                "hs_sandbox_events_run_id": UpstreamIndex("sandbox_events", ("run_id",)),
                "hs_checkpoint_events_run_id": UpstreamIndex("checkpoint_events", ("run_id",)),
                "hs_spawns_parent_run_id_step": UpstreamIndex("spawns", ("parent_run_id", "step")),
                "hs_mcp_events_run_id": UpstreamIndex("mcp_events", ("run_id",)),
                "hs_context_events_run_id": UpstreamIndex("context_events", ("run_id",)),
                "hs_ledger_observations_run_id": UpstreamIndex("ledger_observations", ("run_id",)),
            }
        ),
        OWN_STEP_TOKENS: MappingProxyType(
            {
                "hs_steps_run_id_step_id_tokens": UpstreamIndex(
                    "steps", ("run_id", "step", "id", "tokens")
                )
            }
        ),
        OWN_SPEND: MappingProxyType(
            {"hs_provider_calls_at": UpstreamIndex("provider_calls", ("at",))}
        ),
    }
)
"""harness_store's `hs_` indexes each of its revisions creates (name → table, columns)."""

OWN_INDEXES_DROPPED: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {OWN_STEP_TOKENS: ("hs_steps_run_id_step",)}
)
"""The `hs_` indexes one of harness_store's revisions drops (hs2's covering index of steps
replaces hs1's); a release's drops are its `Release.drops_own`."""

_RELEASE_NAME = re.compile(r"^(?:v)?0\.(\d+)(?:\.\d+)?$")


def _minor(name: str) -> int:
    return int(name.split(".")[1])


def revision_for(name: str) -> str:
    """The revision a release name means: itself when it changed the schema, else the newest
    revision at or below it (0.14 … 0.17 → `hs1`, 0.29 → 0.28, 0.66 → 0.65). Revision ids and
    Alembic's own words (`head`, `base`, …) come back unchanged; `0.67` and later raise
    `KeyError`, since what they changed is unknown."""
    if name in REVISIONS:
        return name
    match = _RELEASE_NAME.match(name)
    if match is None:
        return name
    minor = int(match.group(1))
    if minor > _minor(NEWEST_KNOWN_RELEASE):
        raise KeyError(
            f"io-harness 0.{minor} is newer than {NEWEST_KNOWN_RELEASE}, "
            "the newest release harness_store knows"
        )
    if name.startswith("v") or name.count(".") > 1:
        short = f"0.{minor}"
        if short in REVISIONS:
            return short
    below = [r for r in RELEASE_NAMES if _minor(r) <= minor]
    if not below:
        return name
    newest = below[-1]
    return OWN_INDEXES if newest == STORE_RELEASE and minor > _minor(STORE_RELEASE) else newest


def release_of_revision(revision: str) -> str:
    """The upstream release whose shape a revision holds (`hs1` holds 0.13's, `hs2` and `hs3`
    0.65's)."""
    return OWN_REVISIONS.get(revision, revision)


def release(name: str) -> Release:
    """The release of that name."""
    for r in RELEASES:
        if r.name == name:
            return r
    raise KeyError(name)


def _cumulative() -> Mapping[str, Mapping[str, frozenset[str]]]:
    shapes: dict[str, Mapping[str, frozenset[str]]] = {}
    tables: dict[str, frozenset[str]] = {}
    for r in RELEASES:
        for t, cols in r.new_tables.items():
            tables[t] = frozenset(cols)
        for t, cols in r.new_columns.items():
            tables[t] = tables[t] | frozenset(cols)
        shapes[r.name] = MappingProxyType(dict(tables))
    return MappingProxyType(shapes)


SHAPES = _cumulative()
"""Release name → {table → columns} that a store has once that release opened it."""


def _cumulative_indexes() -> Mapping[str, Mapping[str, UpstreamIndex]]:
    out: dict[str, Mapping[str, UpstreamIndex]] = {}
    indexes: dict[str, UpstreamIndex] = {}
    for r in RELEASES:
        indexes.update(r.new_indexes)
        out[r.name] = MappingProxyType(dict(indexes))
    return MappingProxyType(out)


INDEXES = _cumulative_indexes()
"""Release name → upstream's own indexes a store has once that release opened it."""


def formats_at(name: str) -> int:
    """The `user_version` a store has once release `name` opened it (0 before 0.7)."""
    index = RELEASE_NAMES.index(name)
    return CHECKPOINT_FORMAT if index >= RELEASE_NAMES.index("0.7") else 0


def own_indexes_at(revision: str) -> Mapping[str, UpstreamIndex]:
    """harness_store's `hs_` indexes (name → table, columns) a store at `revision` has: what
    the chain up to it created and did not drop again. Every path to `revision` ends with
    them: the revision `hs4` creates any a store stamped by detection lacked, and a
    downgrade leaves what the revision below it holds. Empty below `hs1`."""
    indexes: dict[str, UpstreamIndex] = {}
    for name in REVISIONS[: REVISIONS.index(revision) + 1]:
        if name in RELEASE_NAMES:
            for dropped in release(name).drops_own:
                indexes.pop(dropped, None)
        for dropped in OWN_INDEXES_DROPPED.get(name, ()):
            indexes.pop(dropped, None)
        indexes.update(OWN_INDEXES_ADDED.get(name, {}))
    return MappingProxyType(indexes)


def indexes_at(revision: str) -> Mapping[str, UpstreamIndex]:
    """Every index (name → table, columns, uniqueness, partial WHERE) a store at `revision`
    has: upstream's own of the release it holds (`INDEXES`) and harness_store's
    (`own_indexes_at`)."""
    upstream = INDEXES.get(release_of_revision(revision), {})
    return MappingProxyType({**upstream, **own_indexes_at(revision)})
