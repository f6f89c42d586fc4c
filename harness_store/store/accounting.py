"""What runs cost and what a corpus of runs adds up to (upstream's `accounting.rs`): provider
calls, spend priced by the caller's table, and the outcome, gate and recovery roll-ups.

Upstream reads every provider call back and prices them in Rust. Here each spend roll-up is one
`GROUP BY` with the price table compiled into the statement (a `CASE` on the model, tiers on the
prompt length, rounded per call exactly as upstream rounds), so a million calls are summed by
the database instead of crossing the driver. Should a sum not fit 64-bit SQL integers, the same
answer is computed exactly from the rows, as upstream computes it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Select,
    String,
    and_,
    bindparam,
    case,
    cast,
    exists,
    func,
    insert,
    literal,
    null,
    select,
)

from .. import models as m
from ..errors import IntegerOverflowError, StoreError
from ..formats import i64, opt_text, opt_u64, u32, u64
from ..formats import text as check_text
from ..models.spend import USAGE_SUMS
from ..records import (
    NO_KEY,
    UNKNOWN_MODEL,
    FirstTry,
    Price,
    PriceTable,
    ProviderCall,
    Recovery,
    Spend,
    Tally,
    Usage,
)
from ..records.accounting import spend_from_row
from .marks import pages, reads, writes
from .older import OlderStoreMixin
from .spend import FIRST, counted, fingerprint, row_of
from .spend import run_rows as spend_run_rows
from .spend import spend as spend_from_counters

CALL_COLUMNS = ("step", "attempt", "provider", "model", *USAGE_SUMS, "latency_ms", "ttft_ms",
                "finish_reason", "failure")  # fmt: skip


def make_call(*row: Any) -> ProviderCall:
    """A `provider_calls` row (in `CALL_COLUMNS` order) as upstream reads it: a NULL
    `total_tokens` is no usage at all, the other counters' NULLs are zeros."""
    step, attempt, provider, model, *rest = row
    counts, (latency, ttft, finish, failure) = rest[:7], rest[7:]
    usage = None if counts[2] is None else Usage(*(int(c or 0) for c in counts))
    return ProviderCall(step, attempt, provider, model, usage, latency, ttft, finish, failure)


def _u(name: str) -> ColumnElement[int]:
    return func.coalesce(getattr(m.ProviderCall, name), 0)


def call_cost(p: Price) -> ColumnElement[Any]:
    """SQL for one call's cost under `p`, rounded once per call as upstream rounds it."""
    prompt, cache_read, cache_write = (
        _u("prompt_tokens"),
        _u("cache_read_tokens"),
        _u("cache_write_tokens"),
    )
    fresh = prompt - cache_read - cache_write
    terms: list[ColumnElement[Any]] = []
    if p.input:
        terms.append(case((fresh > 0, fresh), else_=0) * p.input)
    for column, price in (("completion_tokens", p.output), ("cache_read_tokens", p.cache_read),
                          ("cache_write_tokens", p.cache_write)):  # fmt: skip
        if price:
            terms.append(_u(column) * price)
    mtok: ColumnElement[Any] = literal(0)
    for term in terms:
        mtok = mtok + term
    cost = (mtok + 500_000) // 1_000_000
    if p.per_server_tool_request:
        cost = cost + _u("server_tool_requests") * p.per_server_tool_request
    return cost


def price_case(prices: PriceTable) -> ColumnElement[Any]:
    """SQL for a call's cost under the table: NULL when the call has no usage, no model, or
    no price for its model (it is then unpriced)."""
    c = m.ProviderCall
    prompt = _u("prompt_tokens")
    whens: list[tuple[ColumnElement[bool], ColumnElement[Any]]] = []
    for model, base in sorted(prices.prices.items()):
        tiers = prices.tiers_of(model)
        rate: ColumnElement[Any] = call_cost(base)
        if tiers:
            rate = case(
                *[(prompt >= t.min_prompt_tokens, call_cost(t.price)) for t in reversed(tiers)],
                else_=call_cost(base),
            )
        whens.append((c.model == model, rate))
    if not whens:
        return cast(null(), BigInteger)  # typed: PostgreSQL cannot sum an untyped NULL
    return case((c.total_tokens.is_(None), null()), *whens, else_=null())


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
    sums = [0] * 7
    cost = unpriced = 0
    for call in calls:
        if call.usage is None:
            unpriced += 1
            continue
        u = call.usage
        for i, value in enumerate((u.prompt_tokens, u.completion_tokens, u.total_tokens,
                                   u.cache_read_tokens, u.cache_write_tokens,
                                   u.reasoning_tokens, u.server_tool_requests)):  # fmt: skip
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
            run_id=i64(run_id, "run_id"),
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
        with self._write() as conn:
            conn.execute(insert(m.ProviderCall).values(**values))

    @reads
    def provider_calls(self, run_id: int) -> list[ProviderCall]:
        """Every provider call of a run, in order (empty for a run from before 0.18: an
        unrecorded run is not a free one)."""
        if self._lacks("provider_calls"):
            return []
        c = m.ProviderCall
        columns = [getattr(c, name) for name in CALL_COLUMNS]
        statement = select(*columns).where(c.run_id == run_id).order_by(c.id)
        return self._rows(statement, make_call)

    # --- spend (0.18) --------------------------------------------------------------------

    @reads
    def spend_by_model(self, prices: PriceTable, *, since: str | None = None) -> list[Spend]:
        """Spend per model that served the calls, priced by `prices`; calls naming no model
        group under "(unknown model)" and count as unpriced. Ordered by key. `since`
        (beyond upstream; a `YYYY-MM-DD` or stamp prefix) keeps the calls made from then on."""
        return self._spend(prices, since, "model")

    @reads
    def spend_by_day(self, prices: PriceTable, *, since: str | None = None) -> list[Spend]:
        """Spend per UTC day (`YYYY-MM-DD`, from the database clock), priced by `prices`."""
        return self._spend(prices, since, "day")

    @reads
    def spend_by_run(self, prices: PriceTable, *, since: str | None = None) -> list[Spend]:
        """Spend per run (keyed by the run id as text, in text order, as upstream keys it)."""
        return self._spend(prices, since, "run")

    @pages(1000)
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
            except _Inexact:
                rows = None
            except StoreError as exc:
                if not _sum_overflowed(exc):
                    raise
                rows = None
            if rows is not None:
                for row in rows:
                    yield spend_from_row(*row)
                return
        yield from self.spend_by_run(prices, since=since)

    def _spend(self, prices: PriceTable, since: str | None, by: str) -> list[Spend]:
        """From hs3's counters where the store has them (`store.spend`), else one priced
        `GROUP BY` over the calls; exactly from the rows should a sum overflow."""
        if self._lacks("provider_calls"):
            return []  # a store from before 0.18 recorded no calls
        if since is not None:
            since = check_text(since, "since")
        try:
            if not (by == "run" and since is not None) and self._spend_counted():
                return spend_from_counters(self, prices, since, by)
            return self._spend_plain(prices, since, by)
        except _Inexact:
            pass
        except StoreError as exc:
            if not _sum_overflowed(exc):
                raise
        return self._spend_exact(prices, ROW_KEYS[by], since)

    def _spend_counted(self) -> bool:
        with self._read() as conn:
            return counted(conn)

    def _spend_plain(self, prices: PriceTable, since: str | None, by: str) -> list[Spend]:
        """The answer without counters: the calls (since `since`) grouped and priced in SQL."""
        shape = "all" if since is None else "since"
        statement = priced_statement(prices, by, shape)
        with self._read() as conn:
            rows = list(priced_rows(conn, statement, {"since": since}, 1))
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
        self, prices: PriceTable, key: Callable[..., str], since: str | None = None
    ) -> list[Spend]:
        c = m.ProviderCall
        columns = [getattr(c, name) for name in CALL_COLUMNS]
        statement = select(c.run_id, func.substr(c.at, 1, 10), *columns).order_by(c.id)
        if since is not None:
            statement = statement.where(c.at >= since)
        with self._read() as conn:
            return spend_groups(conn.execute(statement), prices, key)

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


def priced_select(prices: PriceTable, keys: list[ColumnElement[Any]]) -> Select[Any]:
    """Calls grouped by `keys`: the key values, then calls, the seven usage sums, the cost under
    `prices` and how many calls it priced."""
    c = m.ProviderCall
    has_usage = c.total_tokens.is_not(None)
    cost = price_case(prices)
    sums = [func.sum(case((has_usage, _u(name)), else_=0)) for name in USAGE_SUMS]
    statement = select(*keys, func.count(), *sums, func.sum(cost), func.count(cost))
    return statement.group_by(*keys)


GROUP_KEYS: dict[str, Callable[[], list[ColumnElement[Any]]]] = {
    "model": lambda: [func.coalesce(m.ProviderCall.model, UNKNOWN_MODEL)],
    "day": lambda: [func.substr(m.ProviderCall.at, 1, 10)],
    "run": lambda: [m.ProviderCall.run_id.expression],
    "day_model": lambda: [
        func.substr(m.ProviderCall.at, 1, 10),
        func.coalesce(m.ProviderCall.model, UNKNOWN_MODEL),
    ],
}
"""The keys of each grouping (`day_model`: the counters' groups)."""


def _where(shape: str) -> ColumnElement[bool] | None:
    at, day = m.ProviderCall.at.expression, func.substr(m.ProviderCall.at, 1, 10)
    d, lo, hi = (bindparam(name, type_=String) for name in ("d", "lo", "hi"))
    wheres: dict[str, ColumnElement[bool] | None] = {
        "all": None,
        "since": at >= bindparam("since"),
        "day": and_(at >= lo, at < hi, day == d),
        "open_day": and_(at >= lo, day == d),
        "runs": m.ProviderCall.run_id.in_(bindparam("ids", expanding=True)),
    }
    return wheres[shape]


_STATEMENTS: dict[tuple[str, str, str], Select[Any]] = {}
"""Priced statements by (price table, grouping, filter): building and hashing a price table's
CASE costs more than running it on one day's calls, so each is built once."""


def priced_statement(prices: PriceTable, by: str, shape: str) -> Select[Any]:
    """The priced GROUP BY of grouping `by` over the calls filter `shape` selects (bound:
    `since`; `d`, `lo`, `hi` for one day; `ids` for runs)."""
    key = (fingerprint(prices), by, shape)
    statement = _STATEMENTS.get(key)
    if statement is None:
        statement = priced_select(prices, GROUP_KEYS[by]())
        where = _where(shape)
        if where is not None:
            statement = statement.where(where)
        if len(_STATEMENTS) >= 64:
            _STATEMENTS.clear()
        _STATEMENTS[key] = statement
    return statement


def priced_rows(
    conn: Connection, statement: Select[Any], params: dict[str, Any], keys: int
) -> Iterator[tuple[tuple[Any, ...], list[int]]]:
    """Each group a priced statement returns: its key values and its ten integers (raises
    `_Inexact` where SQLite's sums overflowed into floating point)."""
    for row in conn.execute(statement, params).all():
        values = row[keys:]
        if any(isinstance(v, float) for v in values):
            raise _Inexact
        yield tuple(row[:keys]), [int(v or 0) for v in values]


def _sum_overflowed(exc: StoreError) -> bool:
    """Whether a priced read failed because a sum passed 64 bits: typed from PostgreSQL's code
    (`IntegerOverflowError`); SQLite's `SUM` fails with its generic result code (no more
    specific one exists), an untyped error that a SELECT over the store's own tables raises
    for nothing else here. Either way the exact path answers from the rows, or raises its own
    error."""
    if isinstance(exc, IntegerOverflowError):
        return True
    cause = getattr(exc.__cause__, "orig", None) or exc.__cause__  # SQLAlchemy's: the driver's
    return type(exc) is StoreError and getattr(cause, "sqlite_errorcode", None) == SQLITE_ERROR


SQLITE_ERROR = 1
"""SQLite's generic result code (`SQLITE_ERROR`)."""


class _Inexact(Exception):
    """The database's integer sums overflowed into floating point."""


ROW_KEYS: dict[str, Callable[..., str]] = {
    "model": lambda run_id, day, call: call.model if call.model is not None else UNKNOWN_MODEL,
    "day": lambda run_id, day, call: day,
    "run": lambda run_id, day, call: str(run_id),
}
"""Upstream's key of a call (run id, day, call) per grouping, for the exact path."""
