"""Records of what runs cost: provider calls with their usage, the operator's price table,
and the roll-ups (spend by model, day or run; tallies of outcomes, days and gate failures;
first-try and recovery counts). Money is integer micro-units, derived at read time from a
price table the caller supplies, never stored (io-harness 0.18, tiers 0.29, roll-ups 0.30)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Self

from ..formats import is_int

MICROS_PER_UNIT = 1_000_000
"""Micro-units in one unit of the operator's currency."""

UNKNOWN_MODEL = "(unknown model)"
"""The `spend_by_model` key of calls whose provider named no model."""

NO_KEY = "(none)"
"""The tally key of rows whose group value is NULL (kept, not dropped)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts one provider call reported, by kind."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    server_tool_requests: int = 0


USAGE_SUMS: tuple[str, ...] = tuple(f.name for f in fields(Usage))
"""The usage counters, in `Usage`'s field order: `provider_calls`' columns and the sums a
kept answer holds. The one list: the models, the Store's SQL, the triggers, the analysis
tables, the benchmark and the tests read it."""


@dataclass(frozen=True)
class ProviderCall:
    """One attempt at a provider call, answered or failed. `usage` None means the provider
    reported nothing (unknown, not free)."""

    step: int = 0
    attempt: int = 0
    provider: str = ""
    model: str | None = None
    usage: Usage | None = None
    latency_ms: int = 0
    ttft_ms: int | None = None
    finish_reason: str | None = None
    failure: str | None = None


@dataclass(frozen=True)
class Price:
    """What one model costs, in micro-units per million tokens (server tool requests: per
    request). Unset dimensions are an explicit zero."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    per_server_tool_request: int = 0


@dataclass(frozen=True)
class PriceTier:
    """A rate that prices the whole request once its prompt reaches `min_prompt_tokens`."""

    min_prompt_tokens: int
    price: Price


@dataclass(frozen=True)
class PriceTable:
    """Prices by model id, dated by the operator: a plain mapping of model to `Price`, and of
    model to its prompt-length tiers (lowest threshold first)."""

    as_of: str
    prices: Mapping[str, Price] = field(default_factory=dict)
    tiers: Mapping[str, tuple[PriceTier, ...]] = field(default_factory=dict)

    @classmethod
    def new(cls, as_of: str) -> Self:
        """An empty table, accurate as of `as_of` (shown, never parsed)."""
        return cls(as_of)

    def with_(self, model: str, price: Price) -> Self:
        """The table with `model`'s base price added or replaced (upstream's `with`)."""
        return replace(self, prices={**self.prices, model: price})

    def with_tiers(self, model: str, tiers: Sequence[PriceTier]) -> Self:
        """The table with `model`'s tiers set (sorted by threshold); empty removes them."""
        rest = {k: v for k, v in self.tiers.items() if k != model}
        if tiers:
            rest[model] = tuple(sorted(tiers, key=lambda t: t.min_prompt_tokens))
        return replace(self, tiers=rest)

    @classmethod
    def from_document(cls, document: Mapping[str, object]) -> Self:
        """A table from upstream's serde form (`{"as_of": …, "prices": {model: {"input": …}},
        "tiers": {model: [{"min_prompt_tokens": …, "price": {…}}]}}`): unnamed price dimensions
        are zero, unknown fields are refused with `ValueError`, as upstream's serde refuses."""
        if not isinstance(document, Mapping) or "as_of" not in document:
            raise ValueError("a price table needs `as_of` (the date its prices were right)")
        unknown = set(document) - {"as_of", "prices", "tiers"}
        if unknown:
            raise ValueError(f"unknown price-table fields: {sorted(unknown)}")
        table = cls(str(document["as_of"]))
        prices = document.get("prices") or {}
        tiers = document.get("tiers") or {}
        if not isinstance(prices, Mapping) or not isinstance(tiers, Mapping):
            raise ValueError("`prices` and `tiers` must be objects keyed by model")
        for model, price in prices.items():
            table = table.with_(str(model), _price(price))
        for model, rows in tiers.items():
            if not isinstance(rows, list):
                raise ValueError(f"the tiers of {model} must be a list")
            parsed = []
            for row in rows:
                if not isinstance(row, Mapping) or set(row) != {"min_prompt_tokens", "price"}:
                    raise ValueError(f"a tier of {model} needs min_prompt_tokens and price")
                parsed.append(PriceTier(_count(row["min_prompt_tokens"]), _price(row["price"])))
            table = table.with_tiers(str(model), parsed)
        return table

    def price(self, model: str) -> Price | None:
        """The base price entered for `model`, if any."""
        return self.prices.get(model)

    def tiers_of(self, model: str) -> tuple[PriceTier, ...]:
        """`model`'s tiers, lowest threshold first (empty: it prices flat)."""
        return tuple(sorted(self.tiers.get(model, ()), key=lambda t: t.min_prompt_tokens))

    def rate(self, model: str, prompt_tokens: int) -> Price | None:
        """The price of a request of `prompt_tokens` on `model`: the highest tier it reaches,
        else the base; None when the model has no base price."""
        base = self.price(model)
        if base is None:
            return None
        reached = [t.price for t in self.tiers_of(model) if prompt_tokens >= t.min_prompt_tokens]
        return reached[-1] if reached else base

    def cost_micros(self, model: str, usage: Usage) -> int | None:
        """What `usage` on `model` cost in micro-units, or None when it has no price. Fresh
        input is the prompt less cache reads and writes (never below zero); the per-million
        products are summed exactly and rounded once, half up, per call."""
        p = self.rate(model, usage.prompt_tokens)
        if p is None:
            return None
        fresh = max(usage.prompt_tokens - usage.cache_read_tokens - usage.cache_write_tokens, 0)
        mtok = (
            fresh * p.input
            + usage.completion_tokens * p.output
            + usage.cache_read_tokens * p.cache_read
            + usage.cache_write_tokens * p.cache_write
        )
        micros = (mtok + 500_000) // 1_000_000 + usage.server_tool_requests * (
            p.per_server_tool_request
        )
        return min(micros, 2**64 - 1)


PRICE_FIELDS = ("input", "output", "cache_read", "cache_write", "per_server_tool_request")


def _count(value: object) -> int:
    if not is_int(value) or not 0 <= value < 2**64:
        raise ValueError(f"a price or threshold is a whole number from 0 to 2^64-1, not {value!r}")
    return value


def _price(value: object) -> Price:
    if not isinstance(value, Mapping):
        raise ValueError(f"a price is an object of micro-units per million tokens, not {value!r}")
    unknown = set(value) - set(PRICE_FIELDS)
    if unknown:
        raise ValueError(f"unknown price fields: {sorted(unknown)}")
    return Price(**{k: _count(v) for k, v in value.items()})


@dataclass(frozen=True, slots=True)
class Spend:
    """One group of provider calls: how many, their summed usage, what the priced ones cost,
    and how many could not be priced (then `cost_micros` is a floor)."""

    key: str
    calls: int
    usage: Usage
    cost_micros: int
    unpriced_calls: int


(
    _SET_PROMPT,
    _SET_COMPLETION,
    _SET_TOTAL,
    _SET_CACHE_READ,
    _SET_CACHE_WRITE,
    _SET_REASONING,
    _SET_SERVER_TOOLS,
) = (Usage.__dict__[f.name].__set__ for f in fields(Usage))
_SET_KEY, _SET_CALLS, _SET_USAGE, _SET_COST, _SET_UNPRICED = (
    Spend.__dict__[f.name].__set__ for f in fields(Spend)
)


def spend_from_row(
    key: str, calls: int, prompt: int, completion: int, total: int, cache_read: int,
    cache_write: int, reasoning: int, server_tools: int, cost: int, unpriced: int,
) -> Spend:  # fmt: skip
    """`Spend(key, calls, Usage(prompt, …, server_tools), cost, unpriced)`, built at half the
    cost: a frozen dataclass's `__init__` sets each field through `object.__setattr__`, and
    `spend_by_run` builds one record per run (100,000 on a large store). Each field is set
    through its class's own slot, so the record is the one the constructor makes."""
    usage = object.__new__(Usage)
    _SET_PROMPT(usage, prompt)
    _SET_COMPLETION(usage, completion)
    _SET_TOTAL(usage, total)
    _SET_CACHE_READ(usage, cache_read)
    _SET_CACHE_WRITE(usage, cache_write)
    _SET_REASONING(usage, reasoning)
    _SET_SERVER_TOOLS(usage, server_tools)
    spend = object.__new__(Spend)
    _SET_KEY(spend, key)
    _SET_CALLS(spend, calls)
    _SET_USAGE(spend, usage)
    _SET_COST(spend, cost)
    _SET_UNPRICED(spend, unpriced)
    return spend


@dataclass(frozen=True)
class Tally:
    """A group key and how many rows it has."""

    key: str
    count: int


@dataclass(frozen=True)
class FirstTry:
    """Finished runs, how many succeeded, and how many succeeded with no gate failing first."""

    runs: int
    succeeded: int
    first_try: int


@dataclass(frozen=True)
class Recovery:
    """How often a provider fallback, a replan and a resume carried runs through."""

    fallbacks: int
    replans: int
    resumes: int
