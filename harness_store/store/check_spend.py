"""The check of hs3's spend counters against `provider_calls` (`Store.check`), and the recount
`repair` makes of them: the run and (day, model) groups whose calls have no counter or whose
kept answer counts other calls, found in SQL, and a counter bumped for each so its spend is
priced again from its calls."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, and_, func, literal_column, select

from ..models.spend import PRICED_DAYS, PRICED_RUNS, SPEND_DAYS, SPEND_RUNS, USAGE_SUMS
from ..records import UNKNOWN_MODEL
from ..records.health import ROWS_SHOWN, Finding, FindingKind
from .check_rows import model_table

K = FindingKind

SUMS = USAGE_SUMS


def _halves(column: Any) -> tuple[Any, Any]:
    """A column's sum as the sums of its high and low 32 bits, neither of which overflows a
    64-bit integer however many calls there are: SQLite's SUM stops with "integer overflow"
    on calls another writer made to sum past 2⁶³−1, which `check` reports rather than fails on."""
    return (
        func.coalesce(func.sum(column.op(">>")(literal_column("32"))), 0),
        func.coalesce(func.sum(column.op("&")(literal_column("4294967295"))), 0),
    )


def _joined(row: Sequence[Any]) -> tuple[int, ...]:
    """(count, sum, …) from (count, high, low, …): each sum exact, as Python's integers are."""
    return (
        int(row[0]),
        *((int(hi) << 32) + int(lo) for hi, lo in zip(row[1::2], row[2::2], strict=True)),
    )


def spend_problems(conn: Connection) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """Run groups and (day, model) groups whose calls have no counter, and those whose kept
    answer is marked current by its counter but counts other calls than `provider_calls`."""
    calls = model_table("provider_calls")
    day = func.substr(calls.c.at, 1, 10)
    model = func.coalesce(calls.c.model, UNKNOWN_MODEL)
    sums = [func.count(), *(part for n in SUMS for part in _halves(calls.c[n]))]
    actual_runs = {  # a run id that is no integer: `value_findings` names it
        (r[0],): _joined(r[1:])
        for r in conn.execute(select(calls.c.run_id, *sums).group_by(calls.c.run_id))
        if isinstance(r[0], int)
    }
    actual_days = {
        (str(r[0]), str(r[1])): _joined(r[2:])
        for r in conn.execute(select(day, model, *sums).group_by(day, model))
    }
    out: list[list[Any]] = []
    for counters, kept, actual, keys in (
        (SPEND_RUNS, PRICED_RUNS, actual_runs, ("run_id",)),
        (SPEND_DAYS, PRICED_DAYS, actual_days, ("day", "model")),
    ):
        have = {tuple(r) for r in conn.execute(select(*(counters.c[k] for k in keys)))}
        uncounted = sorted(group for group in actual if group not in have)
        joined = and_(
            *(kept.c[k] == counters.c[k] for k in keys), kept.c.changes == counters.c.changes
        )
        current = select(*(kept.c[k] for k in keys), kept.c.calls, *(kept.c[n] for n in SUMS))
        stale = sorted(
            {
                tuple(row[: len(keys)])
                for row in conn.execute(current.select_from(kept.join(counters, joined)))
                if tuple(int(v) for v in row[len(keys) :])
                != actual.get(tuple(row[: len(keys)]), (0,) * (len(SUMS) + 1))
            }
        )
        out += [uncounted, stale]
    return out[0], out[1], out[2], out[3]


def spend_findings(conn: Connection) -> list[Finding]:
    runs_uncounted, runs_stale, days_uncounted, days_stale = spend_problems(conn)
    findings = []
    for table, groups, what, key in (
        ("hs_spend_runs", runs_uncounted, "runs with calls but no counter", "run_id"),
        ("hs_spend_runs", runs_stale, "runs whose kept spend counts other calls", "run_id"),
        ("hs_spend_days", days_uncounted, "days with calls but no counter", "day/model"),
        ("hs_spend_days", days_stale, "days whose kept spend counts other calls", "day/model"),
    ):
        if not groups:
            continue
        shown = tuple("/".join(str(v) for v in g) if len(g) > 1 else g[0] for g in groups)
        findings.append(
            Finding(
                K.SPEND_COUNTER,
                table,
                f"{len(groups)} {what} in provider_calls",
                "io-harness prices calls itself and never reads the counters; harness_store's "
                "spend reads "
                + (
                    "leave these groups out"
                    if "no counter" in what
                    else "return the kept, wrong totals"
                ),
                key=key,
                rows=shown[:ROWS_SHOWN],
                count=len(groups),
                repair="recount the spend counters of these groups",
            )
        )
    return findings


Group = tuple[Any, tuple[str, ...], tuple[Any, ...]]
"""A spend group to recount: its counters table, the key columns, the key."""


def recount_work(conn: Connection) -> list[Group]:
    """Every group `spend_problems` finds, read in the caller's read transaction: the groups
    a recount gives a counter one step ahead of its kept answers."""
    runs_uncounted, runs_stale, days_uncounted, days_stale = spend_problems(conn)
    return [(SPEND_RUNS, ("run_id",), g) for g in runs_uncounted + runs_stale] + [
        (SPEND_DAYS, ("day", "model"), g) for g in days_uncounted + days_stale
    ]


def recount_groups(conn: Connection, groups: Iterable[Group]) -> None:
    """Give each of `groups` a counter one step ahead of its kept answers (a counter of 1
    where it has none), so its spend is priced again from the calls; inside the caller's write
    transaction. Each group costs its own keyed statements, whatever the store holds; a group
    bumped twice (a slice repeated after a kill, a trigger's bump meanwhile) is only priced
    again, never counted twice."""
    for counters, keys, group in groups:
        match = and_(*(counters.c[k] == v for k, v in zip(keys, group, strict=True)))
        bump = counters.update().where(match).values(changes=counters.c.changes + 1)
        if not conn.execute(bump).rowcount:
            conn.execute(
                counters.insert().values({**dict(zip(keys, group, strict=True)), "changes": 1})
            )
