"""A run's trace beyond its steps: sandbox, checkpoint, MCP and context events, the observation
ledger, edits and the run's patch, file snapshots and rewinds, citations and server tool calls
(upstream's `trace.rs`). Gate attempts, step turns and the tool-attempt journal are in
`journal`, the event stream in `stream`. Each table is an ordered log read back by `id`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Integer,
    Select,
    String,
    cast,
    exists,
    insert,
    literal,
    null,
    select,
    update,
)

from .. import models as m
from ..errors import InvalidValueError, ResumeError
from ..formats import (
    i64,
    opt_text,
    opt_wrapped_u64,
    text,
    u32,
    u64,
    unwrapped_u64,
    wrapped_u64,
)
from ..records import (
    CheckpointEvent,
    Citation,
    ContextEvent,
    Edit,
    McpEvent,
    Observation,
    ObsKind,
    RewindRecord,
    SandboxEvent,
    ServerToolCall,
    Snapshot,
    StepRecord,
)
from .arguments import WrappedU64
from .marks import reads, writes
from .release_tables import OlderStoreMixin
from .step_reads import step_record


def of_run(run_id: int, *columns: Any) -> Select[Any]:
    """`columns` (of one model) of a run's rows, in the order they were written: the trace
    tables' common read, one seek on their (run_id, …) index."""
    model = columns[0].class_
    return select(*columns).where(model.run_id == run_id).order_by(model.id)


class TraceMixin(OlderStoreMixin):
    """Upstream's `trace.rs` half of the Store (steps themselves live in `runs`)."""

    @reads
    def step(self, run_id: int, step: int) -> StepRecord | None:
        """The record of step `step` of a run, or None when the run has none: the last row
        written under that number, as `steps` lists it last (a retry's row comes before its
        checkpoint's). A point read: one statement, compiled once per process."""
        rows = self._point("step", step_record, False, run_id=run_id, step=step)
        return StepRecord(*rows[0]) if rows else None

    @reads
    def last_step_record(self, run_id: int) -> StepRecord | None:
        """The record of the run's highest step (`last_step`'s number), what an agent resuming
        the run reads first; None when it has no steps. A point read, as `step`."""
        rows = self._point("last_step_record", step_record, True, run_id=run_id)
        return StepRecord(*rows[0]) if rows else None

    @writes
    def record_sandbox_event(self, e: SandboxEvent) -> None:
        """Record one sandbox lifecycle event."""
        self._append(
            m.SandboxEvent,
            run_id=i64(e.run_id, "run_id"),
            step=u32(e.step, "step"),
            kind=text(e.kind, "kind"),
            backend=opt_text(e.backend, "backend"),
            detail=opt_text(e.detail, "detail"),
        )

    @reads
    def sandbox_events(self, run_id: int) -> list[SandboxEvent]:
        """Every sandbox event of a run, in order."""
        s = m.SandboxEvent
        return self._rows(
            of_run(run_id, s.run_id, s.step, s.kind, s.backend, s.detail), SandboxEvent
        )

    @writes
    def record_checkpoint_event(self, e: CheckpointEvent) -> None:
        """Record a checkpoint/resume/skipped event on its own (resume and skip markers)."""
        self._append(
            m.CheckpointEvent,
            run_id=i64(e.run_id, "run_id"),
            step=u32(e.step, "step"),
            kind=text(e.kind, "kind"),
            detail=opt_text(e.detail, "detail"),
        )

    @reads
    def checkpoint_events(self, run_id: int) -> list[CheckpointEvent]:
        """Every checkpoint-lifecycle event of a run, in order."""
        c = m.CheckpointEvent
        return self._rows(of_run(run_id, c.run_id, c.step, c.kind, c.detail), CheckpointEvent)

    # --- MCP -----------------------------------------------------------------------------

    @writes
    def record_mcp(self, run_id: int, e: McpEvent) -> None:
        """Record one MCP event; `ok` is stored as 0/1."""
        self._append(
            m.McpEvent,
            run_id=run_id,
            step=u32(e.step, "step"),
            kind=text(e.kind, "kind"),
            server=text(e.server, "server"),
            tool=opt_text(e.tool, "tool"),
            ok=None if e.ok is None else int(bool(e.ok)),
            millis=opt_wrapped_u64(e.millis, "millis"),
            detail=opt_text(e.detail, "detail"),
        )

    @reads
    def mcp_events(self, run_id: int) -> list[McpEvent]:
        """Every MCP event of a run, in order."""
        e = m.McpEvent
        statement = of_run(run_id, e.step, e.kind, e.server, e.tool, e.ok, e.millis, e.detail)

        def make(step: int, kind: str, server: str, tool: str | None, ok: int | None,
                 millis: int | None, detail: str | None) -> McpEvent:  # fmt: skip
            return McpEvent(step, kind, server, tool, None if ok is None else bool(ok),
                            unwrapped_u64(millis), detail)  # fmt: skip

        return self._rows(statement, make)

    # --- context and the ledger ----------------------------------------------------------

    @writes
    def record_context_event(self, run_id: int, e: ContextEvent) -> None:
        """Record one context-assembly event."""
        self._append(
            m.ContextEvent,
            run_id=run_id,
            step=u32(e.step, "step"),
            kind=text(e.kind, "kind"),
            detail=opt_text(e.detail, "detail"),
            est_tokens=opt_wrapped_u64(e.est_tokens, "est_tokens"),
            reported_tokens=opt_wrapped_u64(e.reported_tokens, "reported_tokens"),
        )

    @writes
    def record_context_reported(self, run_id: int, step: int, reported: WrappedU64) -> None:
        """Fill in what the provider said a turn cost, beside the estimate (drift readable)."""
        c = m.ContextEvent
        with self._write() as conn:
            conn.execute(
                update(c)
                .where(c.run_id == run_id, c.step == u32(step, "step"), c.kind == "assembled")
                .values(reported_tokens=wrapped_u64(reported, "reported"))
            )

    @reads
    def context_events(self, run_id: int) -> list[ContextEvent]:
        """Every context-assembly event of a run, in order."""
        c = m.ContextEvent
        statement = of_run(run_id, c.step, c.kind, c.detail, c.est_tokens, c.reported_tokens)

        def make(step: int, kind: str, detail: str | None, est: int | None,
                 reported: int | None) -> ContextEvent:  # fmt: skip
            return ContextEvent(step, kind, detail, unwrapped_u64(est), unwrapped_u64(reported))

        return self._rows(statement, make)

    @writes
    def record_observations(self, run_id: int, entries: Sequence[Observation]) -> None:
        """Append observations to the run's ledger in one transaction (all or none)."""
        rows = [
            {
                "run_id": run_id,
                "step": u32(o.step, "step"),
                "kind": ObsKind(o.kind).value,
                "target": opt_text(o.target, "target"),
                "text": text(o.text, "text"),
            }
            for o in entries
        ]
        if not rows:
            return
        with self._write() as conn:
            conn.execute(insert(m.LedgerObservation), rows)

    @reads
    def observations(self, run_id: int) -> list[Observation]:
        """The run's ledger in observed order; an unknown kind raises `ResumeError` rather
        than returning a shorter ledger."""
        o = m.LedgerObservation
        statement = of_run(run_id, o.step, o.kind, o.target, o.text)
        with self._read() as conn:
            rows = conn.execute(statement).all()
        out = []
        for step, kind, target, body in rows:
            try:
                obs_kind = ObsKind(kind)
            except ValueError:
                raise ResumeError(
                    f"run {run_id} has a ledger observation of unknown kind {kind!r}"
                ) from None
            out.append(Observation(step, obs_kind, target, body))
        return out

    # --- edits and the patch (0.18, hunks 0.51) ------------------------------------------

    @writes
    def record_edit(self, run_id: int, edit: Edit) -> None:
        """Record one file change: its line counts and the hunk it made (None: not kept)."""
        self._append(
            m.Edit,
            run_id=run_id,
            step=u32(edit.step, "step"),
            tool=text(edit.tool, "tool"),
            path=text(edit.path, "path"),
            lines_added=u64(edit.lines_added, "lines_added"),
            lines_removed=u64(edit.lines_removed, "lines_removed"),
            hunk=opt_text(edit.hunk, "hunk"),
        )

    @reads
    def edits(self, run_id: int) -> list[Edit]:
        """Every file change of a run, in the order made."""
        if self._lacks("edits"):
            return []
        e = m.Edit
        hunk = null() if self._lacks("edits", "hunk") else e.hunk  # hunks are kept from 0.51
        statement = of_run(run_id, e.step, e.tool, e.path, e.lines_added, e.lines_removed, hunk)
        return self._rows(statement, Edit)

    @reads
    def patch(self, run_id: int) -> str:
        """The run's whole change as a patch series in step order: each edit under its own
        `--- a/` / `+++ b/` header (later hunks count lines of the file as the earlier ones
        left it, so the series applies in order); an edit with no hunk stays visible as a
        `#` comment line with its counts."""
        out = []
        for edit in self.edits(run_id):
            if edit.hunk is not None:
                out.append(f"--- a/{edit.path}\n+++ b/{edit.path}\n{edit.hunk}")
            else:
                out.append(
                    f"# step {edit.step} {edit.tool} {edit.path}: +{edit.lines_added} "
                    f"-{edit.lines_removed} lines, no hunk stored\n"
                )
        return "".join(out)

    # --- snapshots and rewinds (0.28, 0.36) ----------------------------------------------

    @writes
    def record_snapshot(self, run_id: int, snap: Snapshot) -> None:
        """Keep a file as it was before the run first changed it. Only the first call for a
        (run, path) lands — one guarded statement, so calling it at every write is right."""
        if snap.state not in ("text", "absent", "unkept"):
            raise InvalidValueError(
                f"a snapshot's state is text, absent or unkept, not {snap.state!r}"
            )
        s = m.Snapshot
        before = None if snap.state == "absent" else text(snap.before or "", "before")
        values = select(
            cast(literal(run_id), BigInteger),
            cast(literal(u32(snap.step, "step")), Integer),
            cast(literal(text(snap.path, "path")), String),
            cast(literal(before), String),
            cast(literal(snap.state), String),
        ).where(~exists().where(s.run_id == run_id, s.path == snap.path))
        statement = insert(s).from_select(["run_id", "step", "path", "before", "state"], values)
        with self._write() as conn:
            conn.execute(statement)

    @reads
    def snapshot(self, run_id: int, path: str) -> Snapshot | None:
        """The restore point of one path under one run (the earliest row), or None if the run
        never wrote it. A state this release does not know reads as `unkept`, never `absent`
        (which a rewind would turn into deleting the file)."""
        if self._lacks("snapshots"):
            return None
        s = m.Snapshot
        statement = (
            select(s.step, s.path, s.before, s.state)
            .where(s.run_id == run_id, s.path == path)
            .order_by(s.id)
            .limit(1)
        )
        with self._read() as conn:
            row = conn.execute(statement).first()
        if row is None:
            return None
        step, found, before, state = row
        if state == "text":
            return Snapshot.text(step, found, before or "")
        if state == "absent":
            return Snapshot.absent(step, found)
        if state == "unkept":
            return Snapshot.unkept(step, found, before or "")
        if state == "archived":
            why = "the session was archived, so the previous contents are gone"
        else:
            why = f'recorded as "{state}", which this version of the store does not understand'
        return Snapshot.unkept(step, found, why)

    @reads
    def snapshot_paths(self, run_id: int) -> list[str]:
        """Every path the run kept a restore point for, in the order it first touched them."""
        if self._lacks("snapshots"):
            return []
        s = m.Snapshot
        return self._rows(of_run(run_id, s.path), str)

    @writes
    def record_rewind(
        self,
        run_id: int,
        files: Sequence[str],
        memory_restored: Sequence[str],
        memory_removed: Sequence[str],
        queue_cleared: Sequence[tuple[int, str]],
        undid_step: int | None = None,
    ) -> None:
        """Write down what one rewind did (before it does it): the files put back, memory keys
        restored and removed, and the queued children cleared (their goals are kept)."""
        self._append(
            m.Rewind,
            run_id=run_id,
            files=rust_json([text(f, "files") for f in files]),
            memory_restored=rust_json([text(k, "memory_restored") for k in memory_restored]),
            memory_removed=rust_json([text(k, "memory_removed") for k in memory_removed]),
            queue_cleared=rust_json([text(goal, "queue_cleared") for _, goal in queue_cleared]),
            undid_step=None if undid_step is None else u32(undid_step, "undid_step"),
        )

    @reads
    def rewinds(self, run_id: int) -> list[RewindRecord]:
        """Every rewind of a run, oldest first (an unreadable list reads as empty)."""
        if self._lacks("rewinds"):
            return []
        r = m.Rewind
        undid = null() if self._lacks("rewinds", "undid_step") else r.undid_step  # from 0.51
        statement = of_run(run_id, r.at, r.files, r.memory_restored, r.memory_removed,
                           r.queue_cleared, undid)  # fmt: skip

        def make(at: str, *rest: Any) -> RewindRecord:
            files, restored, removed, cleared = (_string_list(raw) for raw in rest[:4])
            return RewindRecord(at, files, restored, removed, cleared, rest[4])

        return self._rows(statement, make)

    # --- what the provider looked up (0.22) ----------------------------------------------

    @writes
    def record_citations(self, run_id: int, step: int, citations: Sequence[Citation]) -> None:
        """Record the sources a completion cited at `step`, in one transaction; a URL already
        recorded for the run and step is not written again."""
        c = m.Citation
        rows = [
            (text(x.url, "url"), opt_text(x.title, "title"), opt_text(x.cited_text, "cited_text"))
            for x in citations
        ]
        if not rows:
            return
        step = u32(step, "step")
        with self._write() as conn:
            for url, title, cited in rows:
                values = select(
                    cast(literal(run_id), BigInteger),
                    cast(literal(step), Integer),
                    cast(literal(url), String),
                    cast(literal(title), String),
                    cast(literal(cited), String),
                ).where(~exists().where(c.run_id == run_id, c.step == step, c.url == url))
                columns = ["run_id", "step", "url", "title", "cited_text"]
                conn.execute(insert(c).from_select(columns, values))

    @reads
    def citations(self, run_id: int) -> list[Citation]:
        """Every source the run cited, in order (empty for a run that never searched)."""
        if self._lacks("citations"):
            return []
        c = m.Citation
        return self._rows(of_run(run_id, c.url, c.title, c.cited_text), Citation)

    @writes
    def record_server_tool_calls(
        self, run_id: int, step: int, calls: Sequence[ServerToolCall]
    ) -> None:
        """Record the calls the provider ran on its side at `step`, failures included, in one
        transaction."""
        rows = [
            {
                "run_id": run_id,
                "step": u32(step, "step"),
                "provider": text(x.provider, "provider"),
                "tool": text(x.tool, "tool"),
                "error": opt_text(x.error, "error"),
            }
            for x in calls
        ]
        if not rows:
            return
        with self._write() as conn:
            conn.execute(insert(m.ServerToolCall), rows)

    @reads
    def server_tool_calls(self, run_id: int) -> list[ServerToolCall]:
        """Every provider-side call of the run, in order."""
        if self._lacks("server_tool_calls"):
            return []
        c = m.ServerToolCall
        return self._rows(of_run(run_id, c.provider, c.tool, c.error), ServerToolCall)


def rust_json(value: Any) -> str:
    """JSON as serde_json writes it: compact, non-ASCII kept, object keys sorted (its `Value`
    maps are ordered by key)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _string_list(raw: str) -> tuple[str, ...]:
    """A stored JSON list of strings; anything else reads as empty, as upstream reads it."""
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return ()
    return tuple(value)
