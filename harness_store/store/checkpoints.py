"""The checkpoint path, whole: the statements a checkpoint runs, the leases this Store handle
holds, the turns staged for a step, and the one transaction that writes them together.

`Checkpoints` is a collaborator the Store holds (`StoreBase._checkpoints`), built from the
Store's write unit and its driver runner; the concerns that touch the path (`runs` checkpoints
steps, `leases` takes and gives up leases, `journal` stages turns) call it rather than each
other, so no mixin overrides another and their order in `Store`'s bases does not matter.

A checkpoint with nothing to guard (no lease held, no turn staged: the common case) runs its
pre-compiled statements straight on the driver (two empty-dict checks, then `run_driver`).
A checkpoint of a run this handle leases, or whose step has a staged turn, is one transaction:
the lease's generation checked first (its row locked, so a take-over waits for this commit or
refuses it), then the steps and their checkpoint events, the staged turn of the matching step,
and the renewal; a lost lease raises `LeaseConflictError` with nothing written.
"""

from __future__ import annotations

import itertools
import json
import os
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Engine,
    bindparam,
    case,
    func,
    insert,
    literal_column,
    select,
    text,
    update,
)

from .. import models as m
from ..connector.driver import DriverStatement
from ..dialects import Backend
from ..errors import (
    IntegerOverflowError,
    InvalidValueError,
    LeaseConflictError,
    StoreAccessError,
    StoreError,
)
from ..formats import I64_MAX, i64, opt_text, u32
from ..formats import text as check_text
from ..models.run_tokens import RUN_TOKENS
from ..records import AssistantTurn
from .lease_rows import lease_conflict
from .unreadable import sum_overflowed

STEP_COLUMNS = ("run_id", "step", "decision", "result", "prompt", "tool_call", "tokens")
"""The columns a step row is written with (the rest take upstream's defaults)."""

STEP_TEXT_COLUMNS = ("decision", "result", "prompt", "tool_call")


def tokens_door(run_id: Any, tokens: Any) -> ColumnElement[int]:
    """The tokens a step is written with, or, when they would take its run's token total past
    2⁶³−1 (which io-harness's `SUM` could not read back), an expression that fails the
    statement as a 64-bit overflow does (`abs` of −2⁶³): SQLite's generic result code,
    PostgreSQL's `numeric_value_out_of_range`, so nothing of the write is kept. The total so
    far is one probe of hs6's `hs_run_tokens` (its row locked on PostgreSQL, so two writers
    of a run are checked one after the other); where that total is unknown (NULL) or the run
    has no row, the run's steps summed from their index. `tokens` may be a batch's sum: the
    check of a whole batch in one statement."""
    kept = (
        select(RUN_TOKENS.c.total)
        .where(RUN_TOKENS.c.run_id == run_id)
        .with_for_update()
        .scalar_subquery()
    )
    s = m.table_of(m.Step)
    summed = select(func.sum(s.c.tokens)).where(s.c.run_id == run_id).scalar_subquery()
    zero, one, big = (literal_column(str(n), BigInteger) for n in (0, 1, I64_MAX))
    so_far = func.coalesce(kept, summed, zero)
    # not a constant (a planner could fold one, failing every statement): it reads `kept`
    refused = func.abs(func.coalesce(kept, zero) * zero - big - one)
    return case((tokens <= big - so_far, tokens), else_=refused)


INSERT_STEP = insert(m.table_of(m.Step)).values(
    {
        **{c: bindparam(c) for c in STEP_COLUMNS},
        "tokens": tokens_door(bindparam("run_id"), bindparam("tokens", type_=BigInteger)),
    }
)
"""A step's row, from the parameters `STEP_COLUMNS` names: the one INSERT into `steps`, which
`Store.record`, every checkpoint (compiled for the driver, or in a guarded transaction) and a
backend's batch form (`Backend.bulk_checkpoint_sql`) are made of. Its tokens go through the
door (`tokens_door`)."""

INSERT_CHECKPOINT = insert(m.table_of(m.CheckpointEvent)).values(
    run_id=bindparam("run_id"),
    step=bindparam("step"),
    kind=literal_column("'checkpoint'"),
    detail=literal_column("NULL"),
)
"""A step's `checkpoint` event, from the parameters `run_id` and `step`: the one INSERT of
that event, beside `INSERT_STEP` in every checkpoint."""

BULK_CHUNK = 5000
"""Most steps per statement when a backend checkpoints a batch from column arrays (the chunks
of a batch share one transaction)."""

BULK_CHUNK_CHARS = 32 * 2**20
"""Most characters of text per such statement: at most 4 bytes each in UTF-8, this keeps one
statement's parameters far below PostgreSQL's 1 GB message limit, whatever the steps hold."""

_OWNER_SEQ = itertools.count()

RunDriver = Callable[..., None]
"""`run_driver(work, many=False)`: pre-compiled statements in one write transaction."""

WriteUnit = Callable[[], AbstractContextManager[Connection]]
"""A write unit: a SQLAlchemy connection in the call's write transaction."""


def new_owner_id() -> str:
    """A fresh opaque owner id in upstream's shape, `pid-nanos-seq`: its pid is what lets
    either side (Rust or Python) tell a dead owner's lease from a live one."""
    return f"{os.getpid()}-{time.time_ns()}-{next(_OWNER_SEQ)}"


def bulk_chunks(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Split checked step rows into runs of at most `BULK_CHUNK` rows and, but for a single
    larger row, `BULK_CHUNK_CHARS` characters of text."""
    chunk: list[dict[str, Any]] = []
    chars = 0
    for row in rows:
        size = sum(len(row[c]) for c in STEP_TEXT_COLUMNS)
        if chunk and (len(chunk) == BULK_CHUNK or chars + size > BULK_CHUNK_CHARS):
            yield chunk
            chunk, chars = [], 0
        chunk.append(row)
        chars += size
    if chunk:
        yield chunk


def column_arrays(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's checked step values as one list per column, for a bulk checkpoint."""
    arrays: dict[str, Any] = {c: [row[c] for row in rows] for c in STEP_COLUMNS[1:]}
    arrays["run_id"] = rows[0]["run_id"]
    return arrays


def turn_calls_json(run_id: int, turn: AssistantTurn) -> str:
    """A turn's tool calls as upstream stores them: serde's JSON of `Vec<ToolCall>` (fields in
    declaration order; the arguments a JSON value with sorted keys), compact."""
    try:
        calls = [
            '{"name":'
            + json.dumps(check_text(c.name, "name"), ensure_ascii=False)
            + ',"arguments":'
            + json.dumps(
                c.arguments,
                ensure_ascii=False,
                separators=(",", ":"),
                sort_keys=True,
                allow_nan=False,
            )
            + "}"
            for c in turn.calls
        ]
    except (TypeError, ValueError) as exc:
        raise InvalidValueError(
            f"run {run_id} step {turn.step} has tool calls that cannot be stored: {exc}"
        ) from None
    return "[" + ",".join(calls) + "]"


def write_step_turn(conn: Connection, backend: Backend, run_id: int, turn: AssistantTurn) -> None:
    """The one encoder of a turn's row, shared by `record_step_turn` and the checkpoint."""
    calls = turn_calls_json(run_id, turn)
    conn.execute(
        backend.replace(m.table_of(m.StepTurn)).values(
            run_id=i64(run_id, "run_id"),
            step=u32(turn.step, "step"),
            text=opt_text(turn.text, "text"),
            calls=calls,
        )
    )


@contextmanager
def tokens_checked(run_id: int, read_only: bool) -> Iterator[None]:
    """A step write through `tokens_door`: its refusal, which SQLite reports with the generic
    result code (a step INSERT over the store's own tables fails so for nothing else, as
    `unreadable.summing` reads a sum's), raised as the `IntegerOverflowError` PostgreSQL's
    code gives, naming the run. A read-only Store refuses the write first: it may be of a
    release without hs6's totals, which the door reads, and would fail for that instead."""
    if read_only:
        raise StoreAccessError("the store was opened read-only: a step cannot be written")
    try:
        yield
    except StoreError as exc:
        if sum_overflowed(exc):
            raise IntegerOverflowError(
                f"run {run_id}: these steps' tokens would take the run's token total past "
                f"{I64_MAX} (2⁶³−1), which io-harness could not read back; nothing was written"
            ) from exc
        raise


class Checkpoints:
    """A Store handle's checkpoint path (see the module): its owner id, the leases it holds
    (run id to generation), the turns staged for a step (run id to turn), and the statements
    a checkpoint runs, compiled once for the Store's engine."""

    def __init__(
        self,
        engine: Engine,
        backend: Backend,
        *,
        write: WriteUnit,
        run_driver: RunDriver,
        read_only: bool = False,
    ) -> None:
        self._backend = backend
        self._read_only = read_only
        self._write = write
        self._run_driver = run_driver
        self.owner = new_owner_id()
        """This handle's opaque lease owner id."""
        self.leases: dict[int, int] = {}
        """The runs this handle leases, and at which generation."""
        self.staged: dict[int, AssistantTurn] = {}
        """The turn staged for each run, written by the checkpoint of its step."""
        self._insert_step = DriverStatement.compile(INSERT_STEP, engine)
        self._checkpoint_writes = [
            DriverStatement.compile(statement, engine)
            for statement in backend.checkpoint_writes(INSERT_STEP, INSERT_CHECKPOINT)
        ]
        bulk = backend.bulk_checkpoint_sql(INSERT_STEP, INSERT_CHECKPOINT)
        self._bulk = None if bulk is None else DriverStatement(bulk, None)
        batch_tokens = bindparam("tokens", type_=BigInteger)
        self._bulk_door = DriverStatement.compile(
            select(tokens_door(bindparam("run_id", type_=BigInteger), batch_tokens)), engine
        )
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _new_driver(ref))

    # --- writes --------------------------------------------------------------------------

    def record(self, values: dict[str, Any]) -> None:
        """One step's row, no checkpoint event (`Store.record`)."""
        with tokens_checked(values["run_id"], self._read_only):
            self._run_driver(((self._insert_step, self._insert_step.params(values)),))

    def step(self, run_id: int, values: dict[str, Any]) -> None:
        """Checkpoint one checked step row: the row and its `checkpoint` event, one
        transaction."""
        with tokens_checked(run_id, self._read_only):
            if (self.leases or self.staged) and self._guarded(run_id, (values,)):
                return
            self._run_driver([(w, w.params(values)) for w in self._checkpoint_writes])

    def steps(self, run_id: int, rows: list[dict[str, Any]]) -> None:
        """Checkpoint checked step rows of one run in one transaction (all or none)."""
        with tokens_checked(run_id, self._read_only):
            if (self.leases or self.staged) and self._guarded(run_id, rows):
                return
            if self._bulk is not None:
                bulk, door = self._bulk, self._bulk_door
                work: list[tuple[DriverStatement, Any]] = []
                for chunk in bulk_chunks(rows):
                    # the chunk's rows are one statement, whose door is checked once for
                    # their sum, before it, in the same transaction
                    tokens = sum(row["tokens"] for row in chunk)
                    if tokens > I64_MAX:
                        raise IntegerOverflowError("these steps' tokens sum past 2⁶³−1")
                    work.append((door, door.params({"run_id": run_id, "tokens": tokens})))
                    work.append((bulk, column_arrays(chunk)))
                self._run_driver(work)
            else:
                work = [(w, [w.params(v) for v in rows]) for w in self._checkpoint_writes]
                self._run_driver(work, many=True)

    def _guarded(self, run_id: int, rows: Iterable[dict[str, Any]]) -> bool:
        """The checkpoint of a leased run, or of a step with a staged turn, in one transaction
        (see the module); False when this run has nothing to guard (the caller's fast path)."""
        generation = self.leases.get(run_id)
        rows = list(rows)
        staged = self.staged.get(run_id)
        matches = staged is not None and any(r["step"] == staged.step for r in rows)
        turn = staged if matches else None
        if generation is None and turn is None:
            return False
        conflict = None
        with self._write() as conn:
            if generation is not None:
                conflict = self.check_lease(conn, run_id, generation)
            if conflict is None:
                if rows:
                    conn.execute(INSERT_STEP, rows)
                    marks = [{"run_id": run_id, "step": row["step"]} for row in rows]
                    conn.execute(INSERT_CHECKPOINT, marks)
                if turn is not None:
                    write_step_turn(conn, self._backend, run_id, turn)
                if generation is not None:
                    r = m.RunLease
                    conn.execute(
                        update(r)
                        .where(r.run_id == run_id, r.owner == self.owner)
                        .values(renewed_at=text(self._backend.now()))
                    )
        if conflict is not None:
            raise conflict
        return True

    def check_lease(
        self, conn: Connection, run_id: int, generation: int
    ) -> LeaseConflictError | None:
        """Inside a write: None while this handle still holds `run_id` at `generation` (the
        lease row then stays locked to the commit), else the conflict to raise."""
        r = m.RunLease
        current = conn.execute(
            select(r.generation).where(r.run_id == run_id, r.owner == self.owner).with_for_update()
        ).scalar()
        if current is not None and int(current) == generation:
            return None
        return lease_conflict(conn, self._backend, run_id)

    # --- what this handle holds ----------------------------------------------------------

    def stage(self, run_id: int, turn: AssistantTurn) -> None:
        """Stage `turn` for the checkpoint of its step (refused now if it cannot be stored)."""
        turn_calls_json(run_id, turn)
        self.staged[run_id] = turn

    def forget(self, run_id: int) -> None:
        """Drop the turn staged for a run."""
        self.staged.pop(run_id, None)

    def held(self, run_id: int, generation: int) -> None:
        """This handle now holds `run_id`'s lease at `generation`."""
        self.leases[run_id] = generation

    def released(self, run_id: int, generation: int) -> None:
        """This handle gave up `run_id`'s lease at `generation` (and its staged turn)."""
        if self.leases.get(run_id) == generation:
            del self.leases[run_id]
            self.staged.pop(run_id, None)


def _new_driver(ref: weakref.ref[Checkpoints]) -> None:
    """In a child after `fork()`: another process is another driver. It gets its own owner id
    and holds none of the parent's leases (a checkpoint of a run the parent leases is then
    refused, as upstream refuses a second handle)."""
    path = ref()
    if path is not None:
        path.owner = new_owner_id()
        path.leases = {}
        path.staged = {}
