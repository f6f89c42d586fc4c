"""What a step asked for and what is still in flight: gate attempts (0.34), the assistant turn
each step took (0.64, written in the checkpoint's transaction when staged) and the journal of
tool calls the harness cannot inspect (0.65; upstream's "journal", its `tool_attempts` rows).
Part of upstream's `trace.rs`."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import insert, select, text, update

from .. import models as m
from ..errors import InvalidValueError, ResumeError
from ..formats import i64, u32
from ..formats import text as check_text
from ..records import AssistantTurn, GateAttempt, GateOutcome, ToolAttempt, ToolCall, ToolRecovery
from .checkpoints import turn_calls_json as turn_calls_json
from .checkpoints import write_step_turn
from .marks import reads, writes
from .release_tables import OlderStoreMixin


def _gate(id: int, step: int, phase: str, outcome: str, detail: str, at: str) -> GateAttempt:
    return GateAttempt(id, step, phase, GateOutcome.parse(outcome), detail, at)


class StepAttemptsMixin(OlderStoreMixin):
    """Gate attempts, step turns and tool attempts."""

    # --- gate attempts (0.34) ------------------------------------------------------------

    @writes
    def put_gate_attempt(
        self, run_id: int, step: int, phase: str, outcome: GateOutcome | str, detail: str
    ) -> int:
        """Append how one gate evaluation ended (history is kept, never overwritten); return
        the attempt's id."""
        try:
            kind = GateOutcome(outcome)
        except ValueError:
            raise InvalidValueError(
                f"a gate outcome is passed, failed or errored, not {outcome!r}"
            ) from None
        statement = (
            insert(m.GateAttempt)
            .values(
                run_id=run_id,
                step=u32(step, "step"),
                phase=check_text(phase, "phase"),
                outcome=kind.value,
                detail=check_text(detail, "detail"),
            )
            .returning(m.GateAttempt.id)
        )
        with self._write() as conn:
            return int(conn.execute(statement).scalar_one())

    def _gate_rows(self, run_id: int, *, last: bool) -> list[GateAttempt]:
        if self._lacks("gate_attempts"):
            return []
        g = m.GateAttempt
        statement = select(g.id, g.step, g.phase, g.outcome, g.detail, g.at).where(
            g.run_id == run_id
        )
        statement = statement.order_by(g.id.desc()).limit(1) if last else statement.order_by(g.id)
        return self._rows(statement, _gate)

    @reads
    def gate_attempts(self, run_id: int) -> list[GateAttempt]:
        """Every gate attempt of a run, oldest first."""
        return self._gate_rows(run_id, last=False)

    @reads
    def last_gate_attempt(self, run_id: int) -> GateAttempt | None:
        """The run's latest gate attempt, or None if it never gated."""
        rows = self._gate_rows(run_id, last=True)
        return rows[0] if rows else None

    # --- step turns (0.64) ---------------------------------------------------------------

    @writes
    def record_step_turn(self, run_id: int, turn: AssistantTurn) -> None:
        """Record what a step asked for; a later turn of the same step replaces it (one row
        per step: the turn the model last took)."""
        with self._write() as conn:
            write_step_turn(conn, self._backend, run_id, turn)

    @writes
    def stage_step_turn(self, run_id: int, turn: AssistantTurn) -> None:
        """Stage the turn a step took, for `checkpoint_step` of that step to write in its own
        transaction (after the lease check), so a step that never commits leaves no turn.
        One staged turn per run; a retried step stages again."""
        self._checkpoints.stage(run_id, turn)  # refuses what cannot be stored now

    @writes
    def forget_staged_turn(self, run_id: int) -> None:
        """Drop the turn staged for a run this handle no longer drives."""
        self._checkpoints.forget(run_id)

    @reads
    def step_turns(self, run_id: int) -> list[AssistantTurn]:
        """Every recorded turn of a run, oldest step first; a row this release cannot read
        raises `ResumeError` rather than restoring a different conversation."""
        if self._lacks("step_turns"):
            return []
        t = m.StepTurn
        statement = select(t.step, t.text, t.calls).where(t.run_id == run_id).order_by(t.step)
        with self._read() as conn:
            rows = conn.execute(statement).all()
        out = []
        for step, body, raw in rows:
            calls = _parse_calls(raw)
            if calls is None:
                raise ResumeError(
                    f"run {run_id} step {step} has an assistant turn this binary cannot read"
                )
            out.append(AssistantTurn(step, body, calls))
        return out

    # --- the tool-attempt journal (0.65) -------------------------------------------------

    @writes
    def open_attempt(
        self, run_id: int, step: int, tool: str, recovery: ToolRecovery | str
    ) -> int | None:
        """Journal a call the harness cannot inspect before making it, committed on its own
        (outside any step transaction, so it survives the process dying mid-call); return the
        attempt's id. A replayable call is not journalled: None, nothing written."""
        try:
            kind = ToolRecovery(recovery)
        except ValueError:
            raise InvalidValueError(
                f"a tool recovery is replayable or indeterminate, not {recovery!r}"
            ) from None
        values = {"run_id": run_id, "step": u32(step, "step"),
                  "tool": check_text(tool, "tool")}  # fmt: skip
        if kind is ToolRecovery.REPLAYABLE:
            return None
        statement = insert(m.ToolAttempt).values(**values).returning(m.ToolAttempt.id)
        with self._write() as conn:
            return int(conn.execute(statement).scalar_one())

    @writes
    def close_attempt(self, attempt_id: int) -> None:
        """Close an attempt whose call returned (a closed attempt is left as it is)."""
        self._finish_attempt(attempt_id, {})

    @writes
    def resolve_attempt(self, attempt_id: int, resolution: str) -> None:
        """Close an attempt by an operator's decision, recording what was decided."""
        self._finish_attempt(attempt_id, {"resolution": check_text(resolution, "resolution")})

    def _finish_attempt(self, attempt_id: int, values: dict[str, Any]) -> None:
        a = m.ToolAttempt
        statement = (
            update(a)
            .where(a.id == i64(attempt_id, "attempt_id"), a.completed_at.is_(None))
            .values(completed_at=text(self._backend.now()), **values)
        )
        with self._write() as conn:
            conn.execute(statement)

    @reads
    def open_attempts(self, run_id: int) -> list[ToolAttempt]:
        """The run's attempts that started and never finished, oldest first: what a resume
        must decide about (served by the partial index of open rows)."""
        if self._lacks("tool_attempts"):
            return []
        a = m.ToolAttempt
        statement = (
            select(a.id, a.run_id, a.step, a.tool, a.started_at)
            .where(a.run_id == run_id, a.completed_at.is_(None))
            .order_by(a.id)
        )
        return self._rows(statement, ToolAttempt)


def _parse_calls(raw: str) -> tuple[ToolCall, ...] | None:
    """A stored `Vec<ToolCall>`, or None when it is not one."""
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return None
    if not isinstance(value, list):
        return None
    calls = []
    for item in value:
        if not isinstance(item, dict) or not {"name", "arguments"} <= set(item):
            return None
        if not isinstance(item["name"], str):
            return None
        calls.append(ToolCall(item["name"], item["arguments"]))
    return tuple(calls)
