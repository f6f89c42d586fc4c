"""The check of hs6's run token totals (`hs_run_tokens`) against `steps`, and of hs7's
(`hs_run_call_tokens`) against `provider_calls.total_tokens` (`Store.check`), and the recount
`repair` makes of them: a run whose kept total is not what its rows sum to (or NULL where the
sum is known, or no row at all) is named with both numbers, and recounted from its rows, a
slice of runs a write transaction.

The steps are summed exactly in SQL (on SQLite as two halves of 32 bits: its `SUM` fails past
2⁶³−1, the halves never do), and the kept totals compared there, so only the runs found wrong
reach Python; a step whose tokens are no integer of at least 0 makes the run's right total
unknown (NULL), as hs6's triggers make it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Subquery,
    Table,
    case,
    cast,
    exists,
    func,
    literal_column,
    null,
    or_,
    select,
    true,
    union,
    union_all,
)

from ..formats import I64_MAX
from ..models.run_tokens import RUN_CALL_TOKENS, RUN_TOKENS
from ..records.health import ROWS_SHOWN, Finding, FindingKind
from .check_rows import model_table

K = FindingKind

SHOWN_IN_DETAIL = 5
"""The runs whose two numbers a finding's detail spells out (its `rows` name up to
`ROWS_SHOWN` runs, its `count` all of them)."""

LOW = 4294967295


class Totals(NamedTuple):
    """One revision's kept totals: `table`, each run's sum of `source.column`; `every_run`,
    whether every run has its row from the start (hs6's) or from its first row (hs7's)."""

    table: Table
    source: str
    column: str
    every_run: bool
    rows: str
    """What the summed rows are called in a finding."""


STEP_TOTALS = Totals(RUN_TOKENS, "steps", "tokens", True, "steps")
CALL_TOTALS = Totals(RUN_CALL_TOKENS, "provider_calls", "total_tokens", False, "provider calls")
TOTALS = (STEP_TOTALS, CALL_TOTALS)


def right_totals_of(
    dialect: str, runs: Sequence[int] | None = None, totals: Totals = STEP_TOTALS
) -> Subquery:
    """`(run_id, total)` per run with steps (of `runs`, when given): what its kept total
    should be by hs6's rule, its steps' sum, or NULL when that is past 2⁶³−1 or a step's
    tokens are no integer of at least 0. Summed exactly in SQL: on SQLite as two halves of 32
    bits, whose total fits when the high half, its carry in, stays below 2³¹ (as hs6's
    backfill); on PostgreSQL as NUMERIC."""
    s = model_table(totals.source)
    tokens = s.c[totals.column]
    zero: ColumnElement[Any] = literal_column("0")
    if dialect == "sqlite":
        bad = func.count().filter(or_(func.typeof(tokens).not_in(("integer", "null")), tokens < 0))
        hi = func.coalesce(func.sum(tokens.op(">>")(literal_column("32"))), zero)
        lo = func.coalesce(func.sum(tokens.op("&")(literal_column(str(LOW)))), zero)
        high = hi + lo.op(">>")(literal_column("32"))
        over = high > literal_column("2147483647")
        exact: ColumnElement[Any] = high.op("<<")(literal_column("32")).op("|")(
            lo.op("&")(literal_column(str(LOW)))
        )
    else:  # BIGINT, whose SUM is NUMERIC: exact whole
        bad = func.count().filter(tokens < 0)
        summed = func.coalesce(func.sum(tokens), zero)
        over = summed > literal_column(str(I64_MAX))
        exact = cast(summed, BigInteger)
    total = case((or_(bad > 0, over), null()), else_=exact)
    statement = select(s.c.run_id, total.label("total")).group_by(s.c.run_id)
    if runs is not None:
        statement = statement.where(s.c.run_id.in_(runs))
    return statement.subquery()


def right_totals(
    conn: Connection, runs: Sequence[int], totals: Totals = STEP_TOTALS
) -> dict[int, int | None]:
    """What each of `runs`' kept total should be (`right_totals_of`); a run without rows
    should keep 0."""
    right = right_totals_of(conn.dialect.name, runs, totals)
    found = {int(r): t for r, t in conn.execute(select(right.c.run_id, right.c.total))}
    return {run_id: found.get(run_id, 0) for run_id in runs}


MISSING = object()
"""A run with no row in `hs_run_tokens`."""


def token_problems(
    conn: Connection, totals: Totals = STEP_TOTALS
) -> Iterator[tuple[int, Any, int | None]]:
    """`(run_id, kept, right)` of every run whose kept total is wrong, by run id, found in
    SQL (only those reach Python, whatever the store holds): a run with rows (or, for hs6's,
    of `runs`) whose row is missing (`kept` is `MISSING`) or keeps another total than
    `right_totals_of` (0 without rows); a row of a run with neither that counts tokens."""
    runs, steps, t = model_table("runs"), model_table(totals.source), totals.table
    right = right_totals_of(conn.dialect.name, None, totals)
    keys = (
        union(select(runs.c.id.label("run_id")), select(right.c.run_id))
        if totals.every_run
        else select(right.c.run_id)
    ).subquery()
    should = func.coalesce(right.c.total, case((right.c.run_id.is_(None), 0), else_=null()))
    wrong = (
        select(keys.c.run_id, t.c.run_id.is_not(None), t.c.total, should)
        .select_from(
            keys.outerjoin(right, right.c.run_id == keys.c.run_id).outerjoin(
                t, t.c.run_id == keys.c.run_id
            )
        )
        .where(or_(t.c.run_id.is_(None), t.c.total.is_distinct_from(should)))
    )
    stray = select(t.c.run_id, true(), t.c.total, literal_column("0")).where(
        *([~exists().where(runs.c.id == t.c.run_id)] if totals.every_run else []),
        ~exists().where(steps.c.run_id == t.c.run_id),
        or_(t.c.total != 0, t.c.total.is_(None)) if not totals.every_run else t.c.total != 0,
    )
    statement = union_all(wrong, stray).subquery()
    for run_id, present, kept, total in conn.execute(select(statement).order_by(statement.c[0])):
        if isinstance(run_id, int):  # a run id that is no integer: `value_findings` names it
            yield run_id, kept if present else MISSING, None if total is None else int(total)


def _number(value: Any) -> str:
    return "none" if value is MISSING else "unknown" if value is None else str(value)


def run_token_findings(conn: Connection, totals: Totals = STEP_TOTALS) -> list[Finding]:
    shown: list[tuple[int, Any, int | None]] = []
    count = 0
    for problem in token_problems(conn, totals):
        count += 1
        if len(shown) < ROWS_SHOWN:
            shown.append(problem)
    if not count:
        return []
    told = "; ".join(
        f"run {r} kept {_number(kept)}, {totals.rows} sum "
        + ("past 2⁶³−1 or unreadable" if right is None else str(right))
        for r, kept, right in shown[:SHOWN_IN_DETAIL]
    )
    more = f"; and {count - SHOWN_IN_DETAIL} more" if count > SHOWN_IN_DETAIL else ""
    door, written = ("step", "steps") if totals.every_run else ("provider-call", "calls")
    plural = "s" if count > 1 else ""
    return [
        Finding(
            K.RUN_TOKENS,
            totals.table.name,
            f"{count} run{plural} whose kept token total is not their {totals.rows}' sum: "
            f"{told}{more}",
            f"io-harness never reads it; harness_store's {door} door does, so it refuses "
            f"{written} that fit, or takes {written} that take the run's total past what "
            "io-harness can read",
            key="run_id",
            rows=tuple(r for r, _, _ in shown),
            count=count,
            repair=f"recount these runs' token totals from their {totals.rows}",
        )
    ]


def recount_runs(conn: Connection, runs: Iterable[int], totals: Totals = STEP_TOTALS) -> None:
    """Set each of `runs`' kept total to what its rows sum to, inside the caller's write
    transaction: the runs' rows locked first (PostgreSQL; a writer's trigger then commits
    before the rows are read, so none is lost), then summed and written, a keyed statement
    each. A run recounted twice (a slice repeated after a kill) is only set again."""
    runs = sorted(runs)
    t = totals.table
    if conn.dialect.name != "sqlite":
        conn.execute(
            select(t.c.run_id).where(t.c.run_id.in_(runs)).order_by(t.c.run_id).with_for_update()
        )
    right = right_totals(conn, runs, totals)
    for run_id in runs:
        total = right[run_id]
        done = conn.execute(t.update().where(t.c.run_id == run_id).values(total=total)).rowcount
        if not done:
            conn.execute(t.insert().values(run_id=run_id, total=total))


def token_recount_work(conn: Connection, totals: Totals = STEP_TOTALS) -> list[int]:
    """The runs `token_problems` finds, read in the caller's read transaction."""
    return [run_id for run_id, _, _ in token_problems(conn, totals)]
