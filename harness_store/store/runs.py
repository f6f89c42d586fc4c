"""Runs and steps: starting, recording, checkpointing, finishing, summarising, resuming."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import nullcontext
from typing import Any

from sqlalchemy import (
    Select,
    func,
    insert,
    inspect,
    literal_column,
    select,
    text,
    tuple_,
    union_all,
    update,
)

from .. import models as m
from ..errors import InvalidValueError, ResumeError, RunNotFoundError, StoreError
from ..formats import CHECKPOINT_FORMAT, REPLY_TURN, SUCCESS_OUTCOME, i64, is_int, u32, u64
from ..formats import text as check_text
from ..policy import PolicyFormatError, parse_policy, policy_document
from ..records import RunStatus, RunSummary, StepRecord
from .base import StoreBase
from .marks import pages, reads, writes
from .prune_guard import hold_run
from .step_reads import RUN_ID, last_step_of, resumable, run_status, tokens_of
from .step_reads import resume_point as point_resume
from .step_reads import run_summary as summary_of
from .unreadable import check_integers, integer_columns, integer_total, summing

STEP_PAGE = 1000
"""Rows per page when `iter_steps` streams a run."""

PAUSING_OUTCOMES = frozenset({"awaiting_approval", "awaiting_plan"})
"""Outcomes that leave a run waiting for a person: paused, no summary (the plan gate's 0.31)."""


def step_values(run_id: int, step: StepRecord) -> dict[str, Any]:
    """A step's column values, checked against upstream's types before anything is written."""
    return {
        "run_id": i64(run_id, "run_id"),
        "step": u32(step.step, "step"),
        "decision": check_text(step.decision, "decision"),
        "result": check_text(step.result, "result"),
        "prompt": check_text(step.prompt, "prompt"),
        "tool_call": check_text(step.tool_call, "tool_call"),
        "tokens": u64(step.tokens, "tokens"),
    }


def steps_of(run_id: int) -> Select[int, str, str, str, str, int, int]:
    """A run's step rows in order, their id last (the keyset of a paged read)."""
    s = m.Step
    return (
        select(s.step, s.decision, s.result, s.prompt, s.tool_call, s.tokens, s.id)
        .where(s.run_id == run_id)
        .order_by(s.step, s.id)
    )


STEP_INTEGERS = integer_columns(steps_of(0).selected_columns)
"""The integer columns of a `steps_of` row, checked as each row is read."""


def token_sources(run_id: int) -> list[tuple[str, str, Any]]:
    """The integer columns a run's token total sums (`integer_total`'s sources)."""
    return [
        ("steps", "tokens", m.Step.run_id == run_id),
        ("provider_calls", "total_tokens", m.ProviderCall.run_id == run_id),
    ]


def _last_step() -> Select[int]:
    return last_step_of(RUN_ID)


def _tokens(has_turns: bool) -> Select[int]:
    return tokens_of(RUN_ID, has_turns=has_turns)


def token_terms_of(run_id: int, *, has_turns: bool = True) -> Select[Any]:
    """The values `tokens_of` sums, one a row (the same rule: a reply turn's provider calls,
    any other run's steps), for a total summed exactly outside the database."""
    by_steps = select(m.Step.tokens.label("tokens")).where(m.Step.run_id == run_id)
    if not has_turns:
        return by_steps
    calls = m.ProviderCall
    kind = select(m.Run.turn_kind).where(m.Run.id == run_id).scalar_subquery()
    reply = func.coalesce(kind, "") == REPLY_TURN  # a NULL kind is no reply turn, as in a CASE
    by_calls = select(calls.total_tokens.label("tokens")).where(calls.run_id == run_id, reply)
    return select(union_all(by_steps.where(~reply), by_calls).subquery().c.tokens)


def exact_spent_tokens(store: RunsMixin, run_id: int) -> int:
    """`store.spent_tokens(run_id)` summed in Python, exact past 2⁶³−1 (where the database's
    sum overflows and `spent_tokens` raises): the same rows, the same rule."""
    has_turns = store._has_columns("runs", "turn_kind")
    total = 0
    with store._read() as conn:
        for value in conn.execute(token_terms_of(run_id, has_turns=has_turns)).scalars():
            if type(value) is not int:
                if value is None:
                    continue
                return integer_total(value, store._read, store._backend, token_sources(run_id))
            total += value
    return total


class RunsMixin(StoreBase):
    """The run and step half of upstream's Store."""

    # --- starting ------------------------------------------------------------------------

    @writes
    def start_run(self, goal: str, file: str) -> int:
        """Start a run row, `running`, stamped from the database clock; return its id."""
        values = {"goal": check_text(goal, "goal"), "file": check_text(file, "file")}
        return self._insert_run(values)

    @writes
    def start_child_run(self, goal: str, file: str, parent_run_id: int, depth: int) -> int:
        """Start a child run under `parent_run_id` at `depth`; return its id."""
        values = {
            "goal": check_text(goal, "goal"),
            "file": check_text(file, "file"),
            "parent_run_id": parent_run_id,
            "depth": u32(depth, "depth"),
        }
        return self._insert_run(values, hold=parent_run_id)

    def _insert_run(self, values: Mapping[str, Any], hold: int | None = None) -> int:
        statement = (
            insert(m.Run)
            .values(**values, status="running", started_at=text(self._backend.now()))
            .returning(m.Run.id)
        )
        with self._write() as conn:
            if hold is not None:  # a prune of the parent's tree: its turn
                hold_run(conn, self._backend, hold)
            return int(conn.execute(statement).scalar_one())

    # --- steps ---------------------------------------------------------------------------

    @writes
    def record(self, run_id: int, step: StepRecord) -> None:
        """Record one step's trace entry (no checkpoint event)."""
        self._checkpoints.record(step_values(run_id, step))

    @writes
    def checkpoint_step(self, run_id: int, step: StepRecord) -> None:
        """Durably checkpoint one completed step: its trace row and its `checkpoint` event in
        one transaction — a crash leaves both or neither, never a torn half."""
        self._checkpoints.step(run_id, step_values(run_id, step))

    @writes
    def checkpoint_steps(self, run_id: int, steps: Iterable[StepRecord]) -> int:
        """Checkpoint many steps in one transaction (all or none); return how many.

        Beyond upstream: the same rows as calling `checkpoint_step` for each, for importers
        and replays that commit a batch at once.
        """
        rows = [step_values(run_id, s) for s in steps]
        if not rows:
            return 0
        self._checkpoints.steps(run_id, rows)
        return len(rows)

    @reads
    def steps(self, run_id: int) -> list[StepRecord]:
        """Every step of a run, in order (`step`, then insertion), read as one snapshot (one
        statement: a paged read could mix in steps committed between its pages)."""
        with self._read() as conn:
            rows = conn.execute(steps_of(run_id)).all()
        check_integers(rows, STEP_INTEGERS, 6)
        return [StepRecord(*row[:6]) for row in rows]

    @pages("page")
    def iter_steps(self, run_id: int, *, page: int = STEP_PAGE) -> Iterator[StepRecord]:
        """Stream a run's steps in order without loading the run: keyset pages of `page` rows,
        each read in its own short transaction (no lock is held between pages, so steps
        committed meanwhile may appear; `steps` is one snapshot)."""
        if not is_int(page) or page < 1:
            raise InvalidValueError(f"page must be a positive number of rows, not {page!r}")
        s = m.Step
        base = steps_of(run_id).limit(page)
        after: tuple[int, int] | None = None
        while True:
            query = base if after is None else base.where(tuple_(s.step, s.id) > tuple_(*after))
            with self._read() as conn:
                rows = conn.execute(query).all()
            check_integers(rows, STEP_INTEGERS, 6)
            for row in rows:
                yield StepRecord(row[0], row[1], row[2], row[3], row[4], row[5])
            if len(rows) < page:
                return
            after = (rows[-1][0], rows[-1][6])

    @reads
    def last_step(self, run_id: int) -> int:
        """The highest step number recorded for a run, or 0 — the resume point."""
        last = self._point("last_step", _last_step, run_id=run_id)[0][0]
        return integer_total(
            last, self._read, self._backend, [("steps", "step", m.Step.run_id == run_id)]
        )

    @reads
    def spent_tokens(self, run_id: int) -> int:
        """The run's durable spend, restored on resume: its steps' tokens, or for a reply turn
        (0.37) its provider calls' total tokens."""
        has_turns = self._has_columns("runs", "turn_kind")
        with summing():
            total = self._point("spent_tokens", _tokens, has_turns, run_id=run_id)[0][0]
        return integer_total(total, self._read, self._backend, token_sources(run_id))

    @reads
    def canonical_trace(self, run_id: int) -> str:
        """The run reduced to what two identical runs must match, as diffable text (upstream's
        exact format: every step row, then every context event's step, kind and detail)."""
        lines = [
            f"step {s.step} | tokens {s.tokens} | decision {s.decision} | "
            f"tool_call {s.tool_call} | prompt {s.prompt} | result {s.result}\n"
            for s in self.iter_steps(run_id)
        ]
        c = m.ContextEvent
        statement = select(c.step, c.kind, c.detail).where(c.run_id == run_id).order_by(c.id)
        with self._read() as conn:
            lines += [
                f"context {step} | {kind} | {detail or ''}\n"
                for step, kind, detail in conn.execute(statement)
            ]
        return "".join(lines)

    # --- run attributes ------------------------------------------------------------------

    def _update_run(self, run_id: int, **values: Any) -> None:
        """Set columns of an existing run; `RunNotFoundError` (nothing written) when it is
        gone — a deleted run must not look updated to the writer that lost it to a prune."""
        with self._write() as conn:
            changed = conn.execute(
                update(m.Run).where(m.Run.id == i64(run_id, "run_id")).values(**values)
            ).rowcount
        if not changed:
            raise RunNotFoundError(f"no run with id {run_id} in the store")

    @writes
    def set_provider(self, run_id: int, provider: str) -> None:
        """Record which provider ran this run."""
        self._update_run(run_id, provider=check_text(provider, "provider"))

    @reads
    def provider(self, run_id: int) -> str | None:
        """The provider recorded for a run; raises `RunNotFoundError` for a missing run."""
        value: str | None = self._run_column(run_id, m.Run.provider, missing_ok=False)
        return value

    @writes
    def set_status(self, run_id: int, status: str) -> None:
        """Set the durable run status (`running`, `paused`, `completed`, `failed`);
        `RunNotFoundError` for a run that does not exist (or was pruned)."""
        value = status.value if isinstance(status, RunStatus) else check_text(status, "status")
        self._update_run(run_id, status=value)

    @reads
    def status(self, run_id: int) -> str | None:
        """The durable run status, or None if the run does not exist."""
        rows = self._point("status", run_status, run_id=run_id)
        return rows[0][0] if rows else None

    @reads
    def run_status(self, run_id: int) -> RunStatus | None:
        """The durable status as a `RunStatus`, if the run exists."""
        status = self.status(run_id)
        return None if status is None else RunStatus.from_str(status)

    @reads
    def outcome(self, run_id: int) -> str | None:
        """The recorded final outcome of a run, if it has finished."""
        value: str | None = self._run_column(run_id, m.Run.outcome, missing_ok=True)
        return value

    @reads
    def elapsed_secs(self, run_id: int) -> float:
        """Wall-clock seconds since the run's `started_at`, on the database clock; 0 for a run
        with no stamp (pre-0.7)."""
        column: Any = literal_column(self._backend.seconds_since("started_at"))
        seconds = self._run_column(run_id, column, missing_ok=False)
        return max(float(seconds or 0.0), 0.0)

    @reads
    def run_root(self, run_id: int) -> int:
        """The run at the top of `run_id`'s tree (itself for a root), walking `parent_run_id`
        up (0.60); `RunNotFoundError` for a run that does not exist."""
        r = m.Run
        up = select(r.id, r.parent_run_id).where(r.id == run_id).cte("up", recursive=True)
        up = up.union_all(select(r.id, r.parent_run_id).join(up, r.id == up.c.parent_run_id))
        statement = select(up.c.id).where(up.c.parent_run_id.is_(None)).limit(1)
        value = self._scalar(statement)
        if value is None:
            raise RunNotFoundError(f"no run with id {run_id} in the store, or its tree has no root")
        return int(value)

    @reads
    def runs(self) -> list[int]:
        """Every run id in the store, newest first."""
        return self._rows(select(m.Run.id).order_by(m.Run.id.desc()), int)

    @reads
    def last_run(self) -> int | None:
        """The most recently started run, if any."""
        value = self._scalar(select(func.max(m.Run.id)))
        return None if value is None else int(value)

    # --- finishing -----------------------------------------------------------------------

    @writes
    def finish_run(self, run_id: int, outcome: str) -> None:
        """Record the outcome and derive the status: `awaiting_approval` or `awaiting_plan`
        (0.31) pauses the run, any other outcome completes it and writes its `run_outcomes`
        summary — in one transaction, so a crash never leaves an outcome without its summary."""
        outcome = check_text(outcome, "outcome")
        status = "paused" if outcome in PAUSING_OUTCOMES else "completed"
        with self._write() as conn:
            changed = conn.execute(
                update(m.Run).where(m.Run.id == run_id).values(outcome=outcome, status=status)
            ).rowcount
            if not changed:
                raise RunNotFoundError(f"no run with id {run_id} in the store")
            if status != "completed":
                return  # a paused run gets no summary yet
            finished_at, duration = conn.execute(
                text(self._backend.finish_clock()), {"run_id": run_id}
            ).one()
            steps = conn.execute(last_step_of(run_id)).scalar_one()
            tokens = conn.execute(tokens_of(run_id)).scalar_one()
            here = (lambda: nullcontext(conn), self._backend)
            summed = [("steps", "step", m.Step.run_id == run_id)]
            steps = integer_total(steps, *here, summed)
            tokens = integer_total(tokens, *here, token_sources(run_id))
            conn.execute(
                self._backend.replace(m.table_of(m.RunOutcome)).values(
                    run_id=run_id,
                    outcome=outcome,
                    success=int(outcome == SUCCESS_OUTCOME),
                    steps=steps,
                    tokens=tokens,
                    duration_ms=None if duration is None else int(max(float(duration), 0.0)),
                    finished_at=finished_at,
                )
            )

    @reads
    def run_summary(self, run_id: int) -> RunSummary | None:
        """What a finished run cost and whether it worked; None if it has not finished, is
        paused, or was finished before 0.12."""
        rows = self._point("run_summary", summary_of, run_id=run_id)
        if not rows:
            return None
        row = rows[0]
        return RunSummary(
            int(row[0]),
            row[1],
            bool(row[2]),
            int(row[3]),
            int(row[4]),
            None if row[5] is None else int(row[5]),
            row[6],
        )

    # --- resume --------------------------------------------------------------------------

    @reads
    def check_resumable(self, run_id: int) -> None:
        """Raise `ResumeError` if the store's checkpoint format is newer than 7, the run does
        not exist, or it is a reply turn that was still answering (0.37: it committed no step,
        so there is nothing to continue). A completed run is resumable (as a no-op)."""
        # Before 0.37 (a read-only Store on an older store) no run is a turn.
        has_turns = self._has_columns("runs", "turn_kind")
        format_sql = self._format_column()
        row = self._point("resumable", resumable, format_sql, has_turns, run_id=run_id)[0]
        refuse_resume(run_id, row)

    @reads
    def resume_point(self, run_id: int) -> tuple[int, int]:
        """`check_resumable`, `last_step` and `spent_tokens` in one read: what a harness reads
        before it resumes a run, as one statement (one round trip on PostgreSQL). Raises what
        `check_resumable` raises; else returns (the highest step recorded, the run's durable
        spend), each as its own method returns it."""
        has_turns = self._has_columns("runs", "turn_kind")
        format_sql = self._format_column()
        try:
            with summing():
                row = self._point(
                    "resume_point", point_resume, format_sql, has_turns, run_id=run_id
                )
        except StoreError:  # (SQLite's SUM overflowing) a refusal of the run comes first, as
            self.check_resumable(run_id)  # when the three reads are made in turn
            raise
        refuse_resume(run_id, row[0])
        last = integer_total(
            row[0][4], self._read, self._backend, [("steps", "step", m.Step.run_id == run_id)]
        )
        return last, integer_total(row[0][5], self._read, self._backend, token_sources(run_id))

    _format_table_seen = False

    def _format_column(self) -> str:
        """The backend's expression of the checkpoint format, or `0` for a store without the
        table it reads (one from before 0.7, read-only); whether the table is there is asked
        until it is (a writable Store has it from its open on)."""
        expression, table = self._backend.checkpoint_format_column()
        if table is None or self._format_table_seen:
            return expression
        with self._read() as conn:
            self._format_table_seen = inspect(conn).has_table(table)
        return expression if self._format_table_seen else "0"

    @writes
    def record_run_policy(self, run_id: int, policy: Mapping[str, Any] | str) -> None:
        """Record the policy a run was started under (JSON text or a mapping), replacing any
        earlier record for the run. It must be a policy io-harness can read back (see
        `harness_store.policy`), and is stored as upstream serialises it; anything else
        raises `InvalidValueError` and writes nothing."""
        try:
            document = policy_document(policy)
        except PolicyFormatError as exc:
            raise InvalidValueError(f"not a policy io-harness can read: {exc}") from None
        with self._write() as conn:
            conn.execute(
                self._backend.replace(m.table_of(m.RunPolicy)).values(
                    run_id=run_id, policy=check_text(document, "policy")
                )
            )

    @reads
    def run_policy(self, run_id: int) -> dict[str, Any] | None:
        """The policy a run was started under, read as upstream's `Policy` (a 0.7-era policy
        without `net` reads as `deny`), or None when none was recorded — never read None as
        permissive. A record upstream could not read raises `ResumeError`."""
        document = self._scalar(select(m.RunPolicy.policy).where(m.RunPolicy.run_id == run_id))
        if document is None:
            return None
        try:
            return parse_policy(document)
        except PolicyFormatError as exc:
            raise ResumeError(f"run {run_id} has an unreadable recorded policy: {exc}") from None


def refuse_resume(run_id: int, row: Any) -> None:
    """`check_resumable`'s refusals, from its row (the checkpoint format, the run's turn kind,
    status and id)."""
    version, turn, status, found = int(row[0] or 0), row[1], row[2], row[3]
    if version > CHECKPOINT_FORMAT:
        raise ResumeError(
            f"checkpoint format {version} is newer than supported {CHECKPOINT_FORMAT}; "
            "upgrade harness_store to resume this run"
        )
    if found is None:
        raise ResumeError(f"no run with id {run_id} in the store")
    if (turn, status) == (REPLY_TURN, "running"):
        raise ResumeError(
            f"run {run_id} is a conversational turn that was answering when it stopped; it "
            "committed no step, so there is nothing to continue — take the turn again"
        )


__all__ = ["RunsMixin", "step_values"]
