"""The upstream releases harness_store knows, and the shape each one leaves a store in.

A shape is what a release's open guarantees once it has run to the end: the tables, their
columns, and (from 0.7) `user_version` stamped to 7. Shapes are cumulative; 0.9 equals 0.8 and
0.11 equals 0.10 because those releases changed no schema. The Alembic revision of each release
is named after it ("0.1" … "0.13"), so `alembic upgrade 0.7` reads as what it does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .formats import CHECKPOINT_FORMAT


@dataclass(frozen=True)
class Release:
    """One upstream release's schema change: tables created, columns added, marker stamped."""

    name: str
    new_tables: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    new_columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    stamps_format: bool = False
    summary: str = ""


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
)

RELEASE_NAMES: tuple[str, ...] = tuple(r.name for r in RELEASES)
UPSTREAM_HEAD = RELEASE_NAMES[-1]
"""The newest upstream release this package's schema is (its Alembic revision id)."""

HEAD = "hs1"
"""The head Alembic revision: upstream 0.13 plus harness_store's own indexes."""

REVISIONS: tuple[str, ...] = (*RELEASE_NAMES, HEAD)
"""Every revision of the chain, oldest first."""


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


def formats_at(name: str) -> int:
    """The `user_version` a store has once release `name` opened it (0 before 0.7)."""
    index = RELEASE_NAMES.index(name)
    return CHECKPOINT_FORMAT if index >= RELEASE_NAMES.index("0.7") else 0
