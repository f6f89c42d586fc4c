"""What runs cost and what a corpus of runs adds up to (upstream's `accounting.rs`): provider
calls, spend priced by the caller's table, and the outcome, gate and recovery roll-ups.

Upstream reads every provider call back and prices them in Rust. Here each spend roll-up is one
`GROUP BY` with the price table compiled into the statement (a `CASE` on the model, tiers on the
prompt length, rounded per call exactly as upstream rounds), so a million calls are summed by
the database instead of crossing the driver. Should a sum not fit 64-bit SQL integers, the same
answer is computed exactly from the rows, as upstream computes it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    and_,
    bindparam,
    case,
    exists,
    func,
    insert,
    literal_column,
    select,
)

from .. import models as m
from ..errors import IntegerOverflowError, StoreError
from ..formats import I64_MAX, opt_text, opt_u64, u32, u64
from ..formats import text as check_text
from ..models.run_tokens import RUN_CALL_TOKENS, RUN_TOKENS
from ..models.spend import USAGE_SUMS
from ..records import (
    NO_KEY,
    UNKNOWN_MODEL,
    FirstTry,
    PriceTable,
    ProviderCall,
    Recovery,
    Spend,
    Tally,
    Usage,
)
from ..records.accounting import spend_from_row
from ..stamps import Stamp
from .kept_spend import FIRST, counted, row_of
from .kept_spend import run_rows as spend_run_rows
from .kept_spend import spend as spend_from_counters
from .marks import pages, reads, reads_caching, writes
from .price_sql import InexactSums, fingerprint, priced_rows, priced_statement
from .prune_guard import hold_run
from .release_tables import OlderStoreMixin
from .unreadable import checked, integer_columns, sum_overflowed

_COUNTS = attrgetter(*USAGE_SUMS)
"""A `Usage`'s counters, in `USAGE_SUMS`' order."""

CALL_COLUMNS = ("step", "attempt", "provider", "model", *USAGE_SUMS, "latency_ms", "ttft_ms",
                "finish_reason", "failure")  # fmt: skip


CALL_INTEGERS = integer_columns(
    select(m.ProviderCall.id, *(getattr(m.ProviderCall, n) for n in CALL_COLUMNS)).selected_columns
)
"""The integer columns of a call read with its id first, checked as each row is read."""


def call_tokens_door(run_id: Any, total: Any) -> ColumnElement[int]:
    """A call's `total_tokens`, or, when they would take its run's sum of them past 2⁶³−1
    (which io-harness's `SUM` in `spent_tokens` could not read back), an expression that fails
    the statement as a 64-bit overflow does (`abs` of −2⁶³, as `checkpoints.tokens_door`), so
    nothing is written. The sum so far is one probe of hs7's `hs_run_call_tokens`, whatever
    the run holds; where that is unknown (NULL) or the run has no row, the run's calls summed
    on `provider_calls_run`, and where that sum is already past 64 bits SQLite's `SUM` fails
    the statement the same way. NULL (no usage) adds nothing."""
    kept = (
        select(RUN_CALL_TOKENS.c.total).where(RUN_CALL_TOKENS.c.run_id == run_id).scalar_subquery()
    )
    c = m.table_of(m.ProviderCall)
    summed = select(func.sum(c.c.total_tokens)).where(c.c.run_id == run_id).scalar_subquery()
    zero, one, big = (literal_column(str(n), BigInteger) for n in (0, 1, I64_MAX))
    so_far = func.coalesce(kept, summed, zero)
    # not a constant (a planner could fold one, failing every statement): it reads `kept`
    refused = func.abs(func.coalesce(kept, zero) * zero - big - one)
    return case((total.is_(None), total), (total <= big - so_far, total), else_=refused)


INSERT_CALL = insert(m.table_of(m.ProviderCall)).values(
    {
        **{c: bindparam(c) for c in ("run_id", *CALL_COLUMNS)},
        "total_tokens": call_tokens_door(
            bindparam("run_id"), bindparam("total_tokens", type_=BigInteger)
        ),
    }
)
"""A provider call's row, from the parameters `run_id` and `CALL_COLUMNS` name: its
`total_tokens` go through the door (`call_tokens_door`)."""

LOCK_RUN_TOKENS = (
    select(RUN_TOKENS.c.run_id).where(RUN_TOKENS.c.run_id == bindparam("run_id")).with_for_update()
)
"""The run's hs6 row locked (PostgreSQL) before a call is written: two writers of a run's calls
are checked one after the other, the second's INSERT (a new snapshot under READ COMMITTED)
seeing the first's call and the total hs7's trigger kept of it (every run has an hs6 row from
its start, a run's hs7 row comes with its first call). SQLite's writers are one at a time
already."""


def make_call(*row: Any) -> ProviderCall:
    """A `provider_calls` row (in `CALL_COLUMNS` order) as upstream reads it: a NULL
    `total_tokens` is no usage at all, the other counters' NULLs are zeros."""
    step, attempt, provider, model, *rest = row
    counts, (latency, ttft, finish, failure) = rest[:7], rest[7:]
    usage = None if counts[2] is None else Usage(*(int(c or 0) for c in counts))
    return ProviderCall(step, attempt, provider, model, usage, latency, ttft, finish, failure)


def spend_groups(
    rows: Iterable[tuple[Any, ...]], prices: PriceTable, key: Callable[..., str]
) -> list[Spend]:
    """Upstream's way, exactly: every call keyed by `key(run_id, day, call)`, summed and priced
    in Python, groups in key order."""
    groups: dict[str, list[ProviderCall]] = {}
    for run_id, day, *call in rows:
        made = make_call(*call)
        groups.setdefault(key(run_id, day, made), []).append(made)
    return [group(k, groups[k], prices) for k in sorted(groups)]


def group(key: str, calls: list[ProviderCall], prices: PriceTable) -> Spend:
    """One group's sums and cost; a call with no usage, model or price is unpriced."""
    sums = [0] * len(USAGE_SUMS)
    cost = unpriced = 0
    for call in calls:
        if call.usage is None:
            unpriced += 1
            continue
        u = call.usage
        for i, value in enumerate(_COUNTS(u)):
            sums[i] += value
        micros = None if call.model is None else prices.cost_micros(call.model, u)
        if micros is None:
            unpriced += 1
        else:
            cost += micros
    return Spend(key, len(calls), Usage(*sums), cost, unpriced)


class AccountingMixin(OlderStoreMixin):
    """Provider calls and the roll-ups over them and over finished runs."""

    @writes
    def record_provider_call(self, run_id: int, call: ProviderCall) -> None:
        """Record one attempt at a provider call, answered or failed alike."""
        u = call.usage
        counts = {c: None if u is None else u64(getattr(u, c), c) for c in USAGE_SUMS}
        values = dict(
            run_id=run_id,
            step=u32(call.step, "step"),
            attempt=u32(call.attempt, "attempt"),
            provider=check_text(call.provider, "provider"),
            model=opt_text(call.model, "model"),
            **counts,
            latency_ms=u64(call.latency_ms, "latency_ms"),
            ttft_ms=opt_u64(call.ttft_ms, "ttft_ms"),
            finish_reason=opt_text(call.finish_reason, "finish_reason"),
            failure=opt_text(call.failure, "failure"),
        )
        try:
            with self._write() as conn:
                hold_run(conn, self._backend, values["run_id"])  # a prune of the run: its turn
                if not self._backend.one_connection:
                    conn.execute(LOCK_RUN_TOKENS, {"run_id": values["run_id"]})
                conn.execute(INSERT_CALL, values)
        except StoreError as exc:
            if sum_overflowed(exc):
                raise IntegerOverflowError(
                    f"run {run_id}: this call's total_tokens would take the run's sum of them "
                    f"past {I64_MAX} (2⁶³−1), which io-harness could not read back; nothing "
                    "was written"
                ) from exc
            raise

    @reads
    def provider_calls(self, run_id: int) -> list[ProviderCall]:
        """Every provider call of a run, in order (empty for a run from before 0.18: an
        unrecorded run is not a free one)."""
        if self._lacks("provider_calls"):
            return []
        c = m.ProviderCall
        columns = [c.id, *(getattr(c, name) for name in CALL_COLUMNS)]
        statement = select(*columns).where(c.run_id == run_id).order_by(c.id)
        with self._read() as conn:
            rows = conn.execute(statement).all()
        return [make_call(*row[1:]) for row in checked(rows, CALL_INTEGERS, 0)]

    # --- spend (0.18) --------------------------------------------------------------------

    @reads_caching
    def spend_by_model(self, prices: PriceTable, *, since: str | None = None) -> list[Spend]:
        """Spend per model that served the calls, priced by `prices`; calls naming no model
        group under "(unknown model)" and count as unpriced. Ordered by key. `since`
        (beyond upstream; one instant in the forms `Stamp.parse` takes: a date, or a stamp
        with an optional offset) keeps the calls made from then on, whichever of upstream's
        two spellings stamps them."""
        return self._spend(prices, since, "model")

    @reads_caching
    def spend_by_day(self, prices: PriceTable, *, since: str | None = None) -> list[Spend]:
        """Spend per UTC day (`YYYY-MM-DD`, from the database clock), priced by `prices`."""
        return self._spend(prices, since, "day")

    @reads_caching
    def spend_by_run(self, prices: PriceTable, *, since: str | None = None) -> list[Spend]:
        """Spend per run (keyed by the run id as text, in text order, as upstream keys it)."""
        return self._spend(prices, since, "run")

    @pages(1000, caches=True)
    def iter_spend_by_run(self, prices: PriceTable, *, since: str | None = None) -> Iterator[Spend]:
        """`spend_by_run`'s records in the same order, built one at a time as they are taken
        (the store is read whole at the first one): for a caller that handles a great many
        runs one by one without holding all their records at once."""
        if since is None:
            try:
                counted = self._spend_counted()
                rows = (
                    spend_run_rows(self, prices, fingerprint(prices), row_of, FIRST)
                    if counted
                    else None
                )
            except InexactSums:
                rows = None
            except StoreError as exc:
                if not sum_overflowed(exc):
                    raise
                rows = None
            if rows is not None:
                for row in rows:
                    yield spend_from_row(*row)
                return
        yield from self.spend_by_run(prices, since=since)

    def _spend(self, prices: PriceTable, since: str | None, by: str) -> list[Spend]:
        """From hs3's counters where the store has them (`store.kept_spend`), else one priced
        `GROUP BY` over the calls; exactly from the rows should a sum overflow."""
        if self._lacks("provider_calls"):
            return []  # a store from before 0.18 recorded no calls
        start = None if since is None else Stamp.parse(since, "since")
        try:
            if not (by == "run" and start is not None) and self._spend_counted():
                return spend_from_counters(self, prices, start, by)
            return self._spend_plain(prices, start, by)
        except InexactSums:
            pass
        except StoreError as exc:
            if not sum_overflowed(exc):
                raise
        return self._spend_exact(prices, ROW_KEYS[by], start)

    def _spend_counted(self) -> bool:
        with self._read() as conn:
            return counted(conn)

    def _spend_plain(self, prices: PriceTable, since: Stamp | None, by: str) -> list[Spend]:
        """The answer without counters: the calls (since `since`) grouped and priced in SQL."""
        shape = "all" if since is None else "since"
        statement = priced_statement(prices, by, shape)
        with self._read() as conn:
            rows = list(priced_rows(conn, statement, {} if since is None else since.bounds, 1))
        merged: dict[str, list[int]] = {}
        for (k,), values in rows:
            into = merged.setdefault(str(k), [0] * 10)
            for i, v in enumerate(values):
                into[i] += v
        out = []
        for k in sorted(merged):
            calls, *usage, cost_sum, priced = merged[k]
            out.append(Spend(k, calls, Usage(*usage), cost_sum, calls - priced))
        return out

    def _spend_exact(
        self, prices: PriceTable, key: Callable[..., str], since: str | Stamp | None = None
    ) -> list[Spend]:
        c = m.ProviderCall
        columns = [getattr(c, name) for name in CALL_COLUMNS]
        statement = select(c.id, c.run_id, func.substr(c.at, 1, 10), *columns).order_by(c.id)
        if since is not None:
            statement = statement.where(Stamp.parse(since, "since").at_or_after(c.at))
        integers = integer_columns(statement.selected_columns)
        with self._read() as conn:
            rows = checked(conn.execute(statement), integers, 0)
            return spend_groups((tuple(row[1:]) for row in rows), prices, key)

    # --- roll-ups over finished runs (0.30) ----------------------------------------------

    def _tally(self, statement: Any) -> list[Tally]:
        with self._read() as conn:
            rows = conn.execute(statement).all()
        rows.sort(key=lambda r: (r[0] is not None, r[0] or ""))
        return [Tally(NO_KEY if k is None else str(k), int(n)) for k, n in rows]

    @reads
    def runs_by_outcome(self) -> list[Tally]:
        """Finished runs per outcome string (raw outcomes, not a success flag), by outcome."""
        o = m.RunOutcome
        return self._tally(select(o.outcome, func.count()).group_by(o.outcome))

    @reads
    def runs_by_day(self) -> list[Tally]:
        """Finished runs per UTC day they finished on (the clock `spend_by_day` uses)."""
        day = func.substr(m.RunOutcome.finished_at, 1, 10)
        return self._tally(select(day, func.count()).group_by(day))

    @reads
    def first_try(self) -> FirstTry:
        """Finished runs, those that succeeded, and those that succeeded with no
        `gate_phase_failed` sandbox event (one index probe per run)."""
        o, e = m.RunOutcome, m.SandboxEvent
        failed = exists().where(e.run_id == o.run_id, e.kind == "gate_phase_failed")
        clean = case((and_(o.success == 1, ~failed), 1), else_=0)
        statement = select(
            func.count(), func.coalesce(func.sum(o.success), 0), func.coalesce(func.sum(clean), 0)
        )
        with self._read() as conn:
            runs, succeeded, first = conn.execute(statement).one()
        return FirstTry(int(runs), int(succeeded), int(first))

    @reads
    def gate_failures_by_phase(self) -> list[Tally]:
        """Failed gate phases, counted per failure (not per run), by phase."""
        e = m.SandboxEvent
        statement = (
            select(e.detail, func.count()).where(e.kind == "gate_phase_failed").group_by(e.detail)
        )
        return self._tally(statement)

    @reads
    def recovery(self) -> Recovery:
        """How many provider fallbacks (`served` context events), replans and resumes."""
        x, k = m.ContextEvent, m.CheckpointEvent
        statement = select(
            select(func.count()).where(x.kind == "served").scalar_subquery(),
            select(func.count()).where(x.kind == "replan").scalar_subquery(),
            select(func.count()).where(k.kind == "resume").scalar_subquery(),
        )
        with self._read() as conn:
            fallbacks, replans, resumes = conn.execute(statement).one()
        return Recovery(int(fallbacks), int(replans), int(resumes))


ROW_KEYS: dict[str, Callable[..., str]] = {
    "model": lambda run_id, day, call: call.model if call.model is not None else UNKNOWN_MODEL,
    "day": lambda run_id, day, call: day,
    "run": lambda run_id, day, call: str(run_id),
}
"""Upstream's key of a call (run id, day, call) per grouping, for the exact path."""
