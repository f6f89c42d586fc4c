"""What happened inside a run, step by step: checkpoints, sandbox, MCP and context events, the
observation ledger, edits, file snapshots, citations, server-side tool calls, the event
stream, gate attempts, rewinds, step turns and tool attempts (io-harness 0.6 – 0.65)."""

from __future__ import annotations

from sqlalchemy import Index, text
from sqlalchemy.orm import Mapped, mapped_column

from .base import AUTOINCREMENT, Base, dated, defaulted, rowid_key, stamped


class SandboxEvent(Base):
    """One event in a sandboxed execution's life: create, exec, cap hit, destroy, gate phase
    (0.6). Indexed by (kind, detail) and (run_id, kind) for the roll-ups (0.30); the latter
    serves per-run reads, so harness_store's own `run_id` index goes at 0.30."""

    __tablename__ = "sandbox_events"
    __table_args__ = (
        Index("sandbox_events_kind_detail", "kind", "detail"),
        Index("sandbox_events_run_kind", "run_id", "kind"),
        AUTOINCREMENT,
    )

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    kind: Mapped[str]
    backend: Mapped[str | None]
    detail: Mapped[str | None]


class CheckpointEvent(Base):
    """A checkpoint, resume or skipped-step marker (0.7); a committed `checkpoint` row is a
    step's completion marker. Indexed by kind from 0.30."""

    __tablename__ = "checkpoint_events"
    __table_args__ = (
        Index("hs_checkpoint_events_run_id", "run_id"),
        Index("checkpoint_events_kind", "kind"),
        AUTOINCREMENT,
    )

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    kind: Mapped[str]
    detail: Mapped[str | None]


class McpEvent(Base):
    """One event of an MCP conversation: connected, discovered, called, disconnected (0.8)."""

    __tablename__ = "mcp_events"
    __table_args__ = (Index("hs_mcp_events_run_id", "run_id"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    kind: Mapped[str]
    server: Mapped[str]
    tool: Mapped[str | None]
    ok: Mapped[int | None]
    millis: Mapped[int | None]
    detail: Mapped[str | None]


class ContextEvent(Base):
    """What the context assembler decided for a turn, or a re-read (0.10). Indexed by kind
    from 0.30."""

    __tablename__ = "context_events"
    __table_args__ = (
        Index("hs_context_events_run_id", "run_id"),
        Index("context_events_kind", "kind"),
    )

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    kind: Mapped[str]
    detail: Mapped[str | None]
    est_tokens: Mapped[int | None]
    reported_tokens: Mapped[int | None]


class LedgerObservation(Base):
    """One observation of a run's durable context ledger, ordered by id (0.13)."""

    __tablename__ = "ledger_observations"
    __table_args__ = (Index("hs_ledger_observations_run_id", "run_id"),)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    kind: Mapped[str]
    target: Mapped[str | None]
    text: Mapped[str]


class Edit(Base):
    """One file edit a tool made: path and lines added/removed (0.18); the unified-diff hunk
    from 0.51, so an edit can be shown and undone."""

    __tablename__ = "edits"
    __table_args__ = (AUTOINCREMENT,)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    tool: Mapped[str]
    path: Mapped[str]
    lines_added: Mapped[int]
    lines_removed: Mapped[int]
    at: Mapped[str] = dated()
    hunk: Mapped[str | None]


class Citation(Base):
    """A source a web-search answer cited: URL, title, quoted text (0.22)."""

    __tablename__ = "citations"
    __table_args__ = (Index("citations_run", "run_id", "step"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    url: Mapped[str]
    title: Mapped[str | None]
    cited_text: Mapped[str | None]
    cited_at: Mapped[str] = stamped()


class ServerToolCall(Base):
    """A tool the provider ran on its own side (web search, code execution), with its error
    if it failed (0.22)."""

    __tablename__ = "server_tool_calls"
    __table_args__ = (Index("server_tool_calls_run", "run_id", "step"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    provider: Mapped[str]
    tool: Mapped[str]
    error: Mapped[str | None]
    ran_at: Mapped[str] = stamped()


class Snapshot(Base):
    """A file's content before a run first changed it (`before` NULL: it did not exist), so
    the run can be rewound (0.28)."""

    __tablename__ = "snapshots"
    __table_args__ = (Index("snapshots_run", "run_id", "path"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    path: Mapped[str]
    before: Mapped[str | None]
    state: Mapped[str]
    at: Mapped[str] = dated()


class RunEvent(Base):
    """One entry of the run's event stream, as JSON, with the tree depth it came from (0.33)."""

    __tablename__ = "run_events"
    __table_args__ = (Index("run_events_run", "run_id", "id"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    depth: Mapped[int]
    kind: Mapped[str]
    json: Mapped[str]
    at: Mapped[str] = stamped()


class GateAttempt(Base):
    """One attempt at a verification gate's phase and how it ended (0.34)."""

    __tablename__ = "gate_attempts"
    __table_args__ = (Index("gate_attempts_run", "run_id", "id"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    phase: Mapped[str]
    outcome: Mapped[str]
    detail: Mapped[str] = defaulted("''")
    at: Mapped[str] = stamped()


class Rewind(Base):
    """A rewind of a run: files restored, memory restored and removed, queue cleared (0.36);
    the step it undid from 0.51."""

    __tablename__ = "rewinds"
    __table_args__ = (Index("rewinds_run", "run_id", "id"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    files: Mapped[str]
    memory_restored: Mapped[str]
    memory_removed: Mapped[str]
    queue_cleared: Mapped[str]
    at: Mapped[str] = stamped()
    undid_step: Mapped[int | None]


class StepTurn(Base):
    """The assistant turn (text and tool calls) staged with a step, one per (run, step), so a
    resume replays the conversation exactly (0.64)."""

    __tablename__ = "step_turns"

    run_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    step: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    text: Mapped[str | None]
    calls: Mapped[str]


class ToolAttempt(Base):
    """A tool call begun and, once it ends, how it was resolved; open attempts (no
    `completed_at`) are what a resume must recover (0.65). Ids may be reused."""

    __tablename__ = "tool_attempts"
    __table_args__ = (
        Index(
            "tool_attempts_open",
            "run_id",
            sqlite_where=text("completed_at IS NULL"),
            postgresql_where=text("completed_at IS NULL"),
        ),
    )

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    tool: Mapped[str]
    started_at: Mapped[str] = stamped()
    completed_at: Mapped[str | None]
    resolution: Mapped[str | None]
