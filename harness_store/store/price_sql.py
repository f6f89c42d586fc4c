"""A price table as SQL: one call's cost, rounded per call as upstream rounds it, and the
priced `GROUP BY`s every spend roll-up runs (`AccountingMixin`'s plain one and the kept
answers' `spend`), each statement built once per price table."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import (
    BigInteger,
    BindParameter,
    ColumnElement,
    Connection,
    Select,
    String,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal,
    null,
    select,
)
from sqlalchemy.sql import visitors

from .. import models as m
from ..models.spend import USAGE_SUMS
from ..records import UNKNOWN_MODEL, Price, PriceTable
from ..stamps import bound_at_or_after


def fingerprint(prices: PriceTable) -> str:
    """What a price table prices by, as a key: models, rates and tiers (not `as_of`)."""
    document = {
        "prices": {k: list(vars(v).values()) for k, v in sorted(prices.prices.items())},
        "tiers": {
            k: [[t.min_prompt_tokens, *vars(t.price).values()] for t in prices.tiers_of(k)]
            for k in sorted(prices.tiers)
        },
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def counter(name: str) -> ColumnElement[int]:
    """A `provider_calls` counter, NULL read as 0."""
    return func.coalesce(getattr(m.ProviderCall, name), 0)


def call_cost(p: Price) -> ColumnElement[Any]:
    """SQL for one call's cost under `p`, rounded once per call as upstream rounds it."""
    prompt, cache_read, cache_write = (
        counter("prompt_tokens"),
        counter("cache_read_tokens"),
        counter("cache_write_tokens"),
    )
    fresh = prompt - cache_read - cache_write
    terms: list[ColumnElement[Any]] = []
    if p.input:
        terms.append(case((fresh > 0, fresh), else_=0) * p.input)
    for column, price in (("completion_tokens", p.output), ("cache_read_tokens", p.cache_read),
                          ("cache_write_tokens", p.cache_write)):  # fmt: skip
        if price:
            terms.append(counter(column) * price)
    mtok: ColumnElement[Any] = literal(0)
    for term in terms:
        mtok = mtok + term
    cost = (mtok + 500_000) // 1_000_000
    if p.per_server_tool_request:
        cost = cost + counter("server_tool_requests") * p.per_server_tool_request
    return cost


def price_case(prices: PriceTable) -> ColumnElement[Any]:
    """SQL for a call's cost under the table: NULL when the call has no usage, no model, or
    no price for its model (it is then unpriced)."""
    c = m.ProviderCall
    prompt = counter("prompt_tokens")
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


def priced_select(prices: PriceTable, keys: list[ColumnElement[Any]]) -> Select[Any]:
    """Calls grouped by `keys`: the key values, then calls, the seven usage sums, the cost under
    `prices` and how many calls it priced."""
    c = m.ProviderCall
    has_usage = c.total_tokens.is_not(None)
    cost = price_case(prices)
    sums = [func.sum(case((has_usage, counter(name)), else_=0)) for name in USAGE_SUMS]
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
        "since": bound_at_or_after(at),
        "day_since": and_(at < hi, day == d, bound_at_or_after(at)),
        "day": and_(at >= lo, at < hi, day == d),
        "open_day": and_(at >= lo, day == d),
        "runs": m.ProviderCall.run_id.in_(bindparam("ids", expanding=True)),
    }
    return wheres[shape]


_STATEMENTS: dict[tuple[str, str, str], Select[Any]] = {}
"""Priced statements by (price table, grouping, filter): building and hashing a price table's
CASE costs more than running it on one day's calls, so each is built once."""


RUNS_PER_STATEMENT = 10_000
"""The most run ids one priced statement of runs (`ids`) carries, far below the 65,535
parameters PostgreSQL's driver sends: more are priced a part at a time (each run is a group of
its own, so the parts' groups are the whole answer's)."""


def priced_statement(prices: PriceTable, by: str, shape: str) -> Select[Any]:
    """The priced GROUP BY of grouping `by` over the calls filter `shape` selects (bound:
    a stamp's `bounds` for `since`; `d`, `lo`, `hi` for one day, `d`, `hi` and a stamp's
    `bounds` for the part of a day from an instant; `ids` for runs, grouped by run only)."""
    if shape == "runs" and by != "run":
        raise ValueError("the calls of given runs are priced by run (priced_rows splits them)")
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
    `InexactSums` where SQLite's sums overflowed into floating point). Run ids (`ids`) go
    `RUNS_PER_STATEMENT` at a time."""
    ids = params.get("ids")
    parts = [params]
    if ids is not None and len(ids) > RUNS_PER_STATEMENT and _takes_ids(statement):
        step = RUNS_PER_STATEMENT
        parts = [{**params, "ids": ids[i : i + step]} for i in range(0, len(ids), step)]
    for part in parts:
        for row in conn.execute(statement, part).all():
            values = row[keys:]
            if any(isinstance(v, float) for v in values):
                raise InexactSums
            yield tuple(row[:keys]), [int(v or 0) for v in values]


def _takes_ids(statement: Select[Any]) -> bool:
    """Whether `statement` filters by the run ids `ids` (a statement of every call is given
    them too, and ignores them)."""
    where = statement.whereclause
    return where is not None and any(
        isinstance(e, BindParameter) and e.key == "ids" for e in visitors.iterate(where)
    )


class InexactSums(Exception):
    """The database's integer sums overflowed into floating point."""
