"""Spend by model, day and run from hs3's counters: price again only what changed, and where
the answers priced are kept (`SpendKeeper`).

A priced group (a day's calls of one model, or one run's calls) is kept in
`hs_spend_priced_days` / `hs_spend_priced_runs` with the counter its group had in
`hs_spend_days` / `hs_spend_runs` when it was priced. The triggers bump that counter on every
insert, delete or usage update of one of the group's calls, so a kept answer whose counter still
matches is exactly what pricing the calls again would give; only the others are priced again,
from `provider_calls` (one day through `hs_provider_calls_at`, runs through
`provider_calls_run`), by the same SQL as the plain path. A `since` window takes whole days
from the kept answers and prices its first, partial day from its calls.

The counters are read before the calls, so a write landing in between leaves a kept answer
stamped older than what it counts: priced again next time, never trusted stale. Writing the
kept answers is best effort: a read-only store (or a read-only `transaction()`) answers all
the same, pricing again what it could not keep.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from operator import attrgetter, itemgetter
from typing import Any, Protocol, TypeVar

from sqlalchemy import ColumnElement, Connection, Select, and_, inspect, select, true
from sqlalchemy.sql import ClauseElement

from ..dialects import Backend
from ..errors import StoreAccessError, StoreLockedError
from ..models.spend import PRICED_DAYS, PRICED_RUNS, SPEND_DAYS, SPEND_RUNS, USAGE_SUMS
from ..records import PriceTable, Spend, Usage
from ..records.accounting import spend_from_row
from ..stamps import Stamp, day_after
from .price_sql import fingerprint, priced_rows, priced_statement

BIG = 2**63 - 1
"""The largest value a kept answer's BIGINT column holds (a group past it is not kept)."""

Group = tuple[Any, ...]
"""A kept answer's key: (day, model), or (run id,)."""

Values = Sequence[int]
"""calls, the seven usage sums, cost, priced calls (the order `priced_rows` yields)."""


class KeepsThrough(Protocol):
    """A Store, as far as keeping answers needs it: its write unit and its backend."""

    @property
    def backend(self) -> Backend: ...

    def _write(self) -> AbstractContextManager[Connection]: ...


class Spending(KeepsThrough, Protocol):
    """A Store, as far as answering spend needs it: its reads, and whether and where it may
    keep what it priced."""

    _spend_keeper: SpendKeeper

    def _read(self) -> Any: ...

    def _fetch(self, conn: Connection, statement: ClauseElement) -> list[Any]: ...

    def _may_write(self) -> bool: ...


class SpendKeeper:
    """Where a Store writes the spend answers it priced, to be kept: through itself, or, for
    a read-only twin answering for a writable Store (an `AsyncStore`'s reader on SQLite),
    through that Store, so they are kept all the same. Writing is best effort: a store that
    turns out not to be writable is not tried again."""

    def __init__(self, through: KeepsThrough | None = None, *, read_only: bool = False) -> None:
        self._through = through
        self._unkept = read_only and through is None
        """Whether kept answers cannot be written (a read-only store)."""

    def keep(
        self,
        store: KeepsThrough,
        fp: str,
        keep: list[tuple[Any, Group, int, Values]],
    ) -> None:
        if self._unkept:
            return
        rows: dict[Any, list[dict[str, Any]]] = {}
        for table, group, changes, values in keep:
            if any(v > BIG for v in values):
                continue
            calls, *usage, cost, priced = values
            key = (
                dict(zip(["day", "model"], group, strict=True))
                if table is PRICED_DAYS
                else {"run_id": group[0]}
            )
            rows.setdefault(table, []).append(
                {"prices": fp, **key, "changes": changes, "calls": calls,
                 **dict(zip(USAGE_SUMS, usage, strict=True)), "cost_micros": cost,
                 "unpriced_calls": calls - priced}
            )  # fmt: skip
        target = self._through or store
        try:
            with target._write() as conn:
                for table, batch in rows.items():
                    conn.execute(target.backend.replace(table), batch)
        except StoreAccessError:
            self._unkept = True  # read-only: price again each time, say nothing
        except StoreLockedError:
            pass  # a writer holds the store: kept next time


FULL_SCAN_DAYS = 8
"""Past this many days to price again, one pass over every call beats a range per day."""

FULL_SCAN_RUNS = 2000
"""Past this many runs to price again, one pass over every call beats a probe per run."""


def counted(conn: Connection) -> bool:
    """Whether the store has hs3's counters (a store not yet upgraded, or downgraded, has not)."""
    names = set(inspect(conn).get_table_names())
    return {t.name for t in (SPEND_DAYS, SPEND_RUNS, PRICED_DAYS, PRICED_RUNS)} <= names


def spend(store: Spending, prices: PriceTable, since: Stamp | None, by: str) -> list[Spend]:
    """The answer of `spend_by_<by>` (model, day or run) from the counters; a run window
    (`since` with `by="run"`) is not kept per run and goes the plain way."""
    fp = fingerprint(prices)
    if by == "run":
        return _spend_by_run(store, prices, fp)
    keep: list[tuple[Any, Group, int, Values]] = []
    with store._read() as conn:
        groups = _days(store, conn, prices, fp, since, keep)
    if keep:
        _keep(store, fp, keep)
    merged: dict[str, Values] = {}
    at = 1 if by == "model" else 0
    for group, values in groups:
        if not values[0]:
            continue
        key = str(group[at])
        into = merged.get(key)
        if into is None:
            merged[key] = values  # each group's list is its own
        else:
            merged[key] = [a + b for a, b in zip(into, values, strict=True)]
    out = []
    for k in sorted(merged):
        calls, *usage, cost, priced = merged[k]
        out.append(Spend(k, calls, Usage(*usage), cost, calls - priced))
    return out


def _fetch(store: Spending, conn: Connection, statement: Select[Any]) -> list[Any]:
    """The rows of a statement as plain tuples, read on the unit's driver connection through
    the connector: a run's kept answer is a row, and building a SQLAlchemy `Row` for each of
    100,000 costs more than reading them."""
    return store._fetch(conn, statement)


def _kept_columns(table: Any) -> list[Any]:
    return [table.c.calls, *(table.c[n] for n in USAGE_SUMS), table.c.cost_micros,
            table.c.calls - table.c.unpriced_calls]  # fmt: skip


def _days(
    store: Spending,
    conn: Connection,
    prices: PriceTable,
    fp: str,
    since: Stamp | None,
    keep: list[tuple[Any, Group, int, Values]],
) -> list[tuple[Group, Values]]:
    d, p = SPEND_DAYS, PRICED_DAYS
    # From `since` on, the days after its own are whole, and its own day too when `since` is
    # that day's start; otherwise its day is partial and priced from its calls.
    first = None if since is None else f"{since.instant:%Y-%m-%d}"
    midnight = since is not None and since.instant.time() == dt.time(0)
    whole: ColumnElement[bool] = true()
    if first is not None:
        whole = d.c.day >= first if midnight else d.c.day > first
    on = and_(p.c.prices == fp, p.c.day == d.c.day, p.c.model == d.c.model)
    statement = select(d.c.day, d.c.model, d.c.changes, whole, p.c.changes, *_kept_columns(p))
    rows = _fetch(store, conn, statement.select_from(d.outerjoin(p, on)))
    out: list[tuple[Group, Values]] = []
    stale: dict[Group, int] = {}
    partial: set[str] = set()
    for day, model, changes, is_whole, kept_at, *values in rows:
        if not is_whole:
            if day == first and not midnight:
                partial.add(day)  # the window's first day: from its calls at or after `since`
            continue
        if kept_at == changes:
            out.append(((day, model), values))
        else:
            stale[(day, model)] = int(changes)
    if stale:
        days = sorted({day for day, _ in stale})
        if len(days) > FULL_SCAN_DAYS:
            priced = _priced(conn, prices, "all", [{}])
        else:
            priced = _priced(conn, prices, "day", [_day_range(d) for d in days])
        for group, values in priced:
            if group in stale:
                out.append((group, values))
                keep.append((p, group, stale.pop(group), values))
        for group, changes in stale.items():  # every call of the group is gone
            empty = [0] * 10
            out.append((group, empty))
            keep.append((p, group, changes, empty))
    for day in sorted(partial):
        assert since is not None
        bounds = {"d": day, "hi": day_after(day), **since.bounds}
        out.extend(_priced(conn, prices, "day_since", [bounds]))
    return out


def _day_range(day: str) -> dict[str, Any]:
    """The bounds of one day's calls on `at` (the index's), and the day they must have."""
    return {"d": day, "lo": day, "hi": day_after(day)}


def _priced(
    conn: Connection, prices: PriceTable, shape: str, params: list[dict[str, Any]]
) -> list[tuple[Group, Values]]:
    """The (day, model) groups of the calls each parameter set selects, priced."""
    out: list[tuple[Group, Values]] = []
    for one in params:
        how = shape
        if shape == "day" and one["hi"] is None:  # a day key that is no date: no upper end
            how, one = "open_day", {k: v for k, v in one.items() if k != "hi"}
        statement = priced_statement(prices, "day_model", how)
        out.extend(priced_rows(conn, statement, one, 2))
    return out


Made = TypeVar("Made")


def _spend_by_run(store: Spending, prices: PriceTable, fp: str) -> list[Spend]:
    """Spend per run: `run_rows` built straight into records."""
    return run_rows(store, prices, fp, spend_from_row, _KEY)


def run_rows(
    store: Spending,
    prices: PriceTable,
    fp: str,
    make: Callable[..., Made],
    key: Callable[[Made], str],
) -> list[Made]:
    """Spend per run, each made by `make(key, calls, the seven usage sums, cost, unpriced
    calls)` (a record, or a plain tuple to make one from later), in the records' text order
    of keys: one group per run, so each kept row is a record as it is (no merging), and only
    stale runs are priced again. Made straight from the fetched rows, with no tuple between:
    a large store has 100,000 runs, and each object built on the way is one more the garbage
    collector walks."""
    keep: list[tuple[Any, Group, int, Values]] = []
    r, p = SPEND_RUNS, PRICED_RUNS
    on = and_(p.c.prices == fp, p.c.run_id == r.c.run_id)
    kept = [p.c.calls, *(p.c[n] for n in USAGE_SUMS), p.c.cost_micros, p.c.unpriced_calls]
    statement = select(r.c.run_id, r.c.changes, p.c.changes, *kept).select_from(r.outerjoin(p, on))
    with store._read() as conn:
        rows = _fetch(store, conn, statement)
        stale = {(row[0],): int(row[1]) for row in rows if row[2] != row[1]}
        priced = _price_runs(conn, prices, stale, keep) if stale else []
    out = [
        make(str(row[0]), *row[3:])
        for row in rows
        if row[2] == row[1] and row[3]
    ]  # fmt: skip
    del rows
    for (run_id,), (calls, *usage, cost, priced_calls) in priced:
        if calls:
            out.append(make(str(run_id), calls, *usage, cost, calls - priced_calls))
    out.sort(key=key)
    if keep:
        _keep(store, fp, keep)
    return out


_KEY = attrgetter("key")


def row_of(*values: Any) -> tuple[Any, ...]:
    """`run_rows`' `make` for plain tuples, to be made records one at a time later."""
    return values


FIRST = itemgetter(0)
"""`run_rows`' `key` for `row_of`'s tuples."""


def _price_runs(
    conn: Connection,
    prices: PriceTable,
    stale: dict[Group, int],
    keep: list[tuple[Any, Group, int, Values]],
) -> list[tuple[Group, Values]]:
    """The stale runs priced from their calls (noted in `keep` to be kept); `stale` is
    emptied. A run left with no call is priced as empty."""
    ids = [run_id for (run_id,) in stale]
    shape = "all" if len(ids) > FULL_SCAN_RUNS else "runs"
    statement = priced_statement(prices, "run", shape)
    out: list[tuple[Group, Values]] = []
    for group, values in priced_rows(conn, statement, {"ids": ids}, 1):
        if group in stale:
            out.append((group, values))
            keep.append((PRICED_RUNS, group, stale.pop(group), values))
    for group, changes in stale.items():
        empty = [0] * 10
        out.append((group, empty))
        keep.append((PRICED_RUNS, group, changes, empty))
    return out


def _keep(store: Spending, fp: str, keep: list[tuple[Any, Group, int, Values]]) -> None:
    if store._may_write():  # not inside a read-only transaction
        store._spend_keeper.keep(store, fp, keep)
