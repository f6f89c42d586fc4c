"""Ready-made tables for the questions people ask of their runs first, each an Arrow table
built from `Store.arrow` (the same typed data, joined and grouped with Arrow compute)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..arrow.compute import equals, filled, with_column
from ..records import PriceTable, Usage
from ..records.accounting import UNKNOWN_MODEL, USAGE_SUMS

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..store import Store


def step_table(
    store: Store, *, runs: Iterable[int] | None = None, since: str | None = None
) -> pa.Table:
    """Every step with its tokens, the tool it called and what its provider calls took: one
    row per `steps` row (`run_id`, `step`, `tool`, `tokens`, `decision`), with the calls of
    its step number summed beside it (`calls`, `latency_ms`, `prompt_tokens`,
    `completion_tokens`; 0 calls for a step with none recorded) and the run's `started_at`;
    in trace order (run, step number, then id: a retry after the step it retried), as
    `Store.steps` lists them."""
    steps = store.arrow(
        "steps", runs=runs, since=since, columns=["id", "run_id", "step", "tool", "tokens",
                                                  "decision"],
    )  # fmt: skip
    calls = store.arrow(
        "provider_calls",
        runs=runs,
        columns=["run_id", "step", "latency_ms", "prompt_tokens", "completion_tokens"],
    )
    per_step = calls.group_by(["run_id", "step"]).aggregate(
        [
            ([], "count_all"),
            ("latency_ms", "sum"),
            ("prompt_tokens", "sum"),
            ("completion_tokens", "sum"),
        ]
    )
    per_step = per_step.rename_columns(
        {"count_all": "calls", "latency_ms_sum": "latency_ms",
         "prompt_tokens_sum": "prompt_tokens", "completion_tokens_sum": "completion_tokens"}
    )  # fmt: skip
    started = store.arrow("runs", runs=runs, columns=["id", "started_at"]).rename_columns(
        ["run_id", "started_at"]
    )
    joined = steps.join(per_step, ["run_id", "step"], join_type="left outer")
    joined = joined.join(started, "run_id", join_type="left outer")
    joined = with_column(joined, "calls", filled(joined["calls"], 0))
    order = ["id", "run_id", "step", "started_at", "tool", "tokens", "decision", "calls",
             "latency_ms", "prompt_tokens", "completion_tokens"]  # fmt: skip
    return joined.select(order).sort_by([("run_id", "ascending"), ("step", "ascending"),
                                         ("id", "ascending")])  # fmt: skip


def priced_calls(store: Store, prices: PriceTable, *, since: str | None = None) -> pa.Table:
    """Every provider call with its `day` (UTC, from its stamp), its `model` as spend keys it
    (`(unknown model)` when the provider named none), its usage and `cost_micros` under
    `prices` (null: unpriced — no usage reported, no model, or no price for it), exactly as
    `Store.spend_by_model` prices each call."""
    calls = store.arrow(
        "provider_calls",
        since=since,
        columns=["id", "run_id", "step", "attempt", "provider", "model", *USAGE_SUMS,
                 "latency_ms", "at"],
    )  # fmt: skip
    costs: list[int | None] = []
    columns = {name: calls[name].to_pylist() for name in ("model", *USAGE_SUMS)}
    for i, model in enumerate(columns["model"]):
        if columns["total_tokens"][i] is None or model is None:
            costs.append(None)
            continue
        usage = Usage(*(int(columns[name][i] or 0) for name in USAGE_SUMS))
        costs.append(prices.cost_micros(model, usage))
    day = pc.strftime(calls["at"], format="%Y-%m-%d")
    table = with_column(calls, "model", filled(calls["model"], UNKNOWN_MODEL))
    table = table.append_column("day", day)
    return table.append_column("cost_micros", pa.array(costs, type=pa.int64()))


def spend_by_model_and_day(
    store: Store, prices: PriceTable, *, since: str | None = None
) -> pa.Table:
    """Provider calls priced by model and day: per (`day`, `model`), the `calls`, their
    summed usage, `cost_micros` (of the priced calls) and `unpriced_calls`; summed over days
    it is `Store.spend_by_model`, over models `Store.spend_by_day`."""
    calls = priced_calls(store, prices, since=since)
    unpriced = pc.is_null(calls["cost_micros"])
    reported = pc.is_valid(calls["total_tokens"])
    table = calls.append_column("unpriced", pc.cast(unpriced, pa.int64()))
    # A call that reported no usage adds nothing to the sums, as spend counts it.
    for name in USAGE_SUMS:
        zeroed = pc.if_else(reported, filled(table[name], 0), pa.scalar(0, pa.int64()))
        table = with_column(table, name, zeroed)
    grouped = table.group_by(["day", "model"]).aggregate(
        [
            ([], "count_all"),
            *((name, "sum") for name in USAGE_SUMS),
            ("cost_micros", "sum"),
            ("unpriced", "sum"),
        ]
    )
    grouped = grouped.rename_columns(
        {"count_all": "calls", **{f"{n}_sum": n for n in USAGE_SUMS},
         "cost_micros_sum": "cost_micros", "unpriced_sum": "unpriced_calls"}
    )  # fmt: skip
    grouped = with_column(grouped, "cost_micros", filled(grouped["cost_micros"], 0))
    return grouped.select(
        ["day", "model", "calls", *USAGE_SUMS, "cost_micros", "unpriced_calls"]
    ).sort_by([("day", "ascending"), ("model", "ascending")])


def tool_failures(store: Store, *, since: str | None = None) -> pa.Table:
    """Tool failures by tool, from every table that records a tool's result: MCP calls
    (`source` "mcp": failed when `ok` is false), provider-side tool calls ("server": failed
    with an `error`) and tool attempts ("attempt": failed when never completed — the run
    stopped inside the tool). Per `source` and `tool`: `calls`, `failures`, `failure_rate`."""
    parts = []
    mcp = store.arrow("mcp_events", since=since, columns=["tool", "ok"])
    parts.append(_tally("mcp", mcp["tool"], equals(filled(mcp["ok"], True), False)))
    server = store.arrow("server_tool_calls", since=since, columns=["tool", "error"])
    parts.append(_tally("server", server["tool"], pc.is_valid(server["error"])))
    attempts = store.arrow("tool_attempts", since=since, columns=["tool", "completed_at"])
    parts.append(_tally("attempt", attempts["tool"], pc.is_null(attempts["completed_at"])))
    table = pa.concat_tables(parts)
    rate = pc.divide(
        pc.cast(table["failures"], pa.float64()), pc.cast(table["calls"], pa.float64())
    )
    return table.append_column("failure_rate", rate).sort_by(
        [("source", "ascending"), ("tool", "ascending")]
    )


def _tally(source: str, tools: Any, failed: Any) -> pa.Table:
    table = pa.table({"tool": filled(tools, ""), "failed": pc.cast(failed, pa.int64())})
    grouped = table.group_by("tool").aggregate([([], "count_all"), ("failed", "sum")])
    grouped = grouped.rename_columns({"count_all": "calls", "failed_sum": "failures"})
    sources = pa.array([source] * grouped.num_rows, type=pa.string())
    return pa.Table.from_arrays(
        [sources, grouped["tool"], grouped["calls"], filled(grouped["failures"], 0)],
        names=["source", "tool", "calls", "failures"],
    )


def policy_decisions(
    store: Store, *, runs: Iterable[int] | None = None, since: str | None = None
) -> pa.Table:
    """Policy decisions by rule: per `rule`, `layer`, `kind` (refusal or decision), `act`
    and `decision` (empty for a plain refusal), how many `events` and in how many `runs`."""
    events = store.arrow(
        "policy_events",
        runs=runs,
        since=since,
        columns=["run_id", "kind", "act", "rule", "layer", "decision"],
    )
    keys = ["rule", "layer", "kind", "act", "decision"]
    keyed = pa.Table.from_arrays(
        [*(filled(events[k], "") for k in keys), events["run_id"]], names=[*keys, "run_id"]
    )
    grouped = keyed.group_by(keys).aggregate([([], "count_all"), ("run_id", "count_distinct")])
    grouped = grouped.rename_columns({"count_all": "events", "run_id_count_distinct": "runs"})
    return grouped.select([*keys, "events", "runs"]).sort_by([(k, "ascending") for k in keys])


def tree_runs(store: Store, root: int) -> pa.Table:
    """A tree's runs with their depth and totals, as `Store.tree` lists them: per run its
    `parent_run_id`, `depth`, `goal`, `status`, `outcome`, `steps` (`MAX(step)`), `tokens`
    (its own), `provider_calls`, and `tree_tokens`: its tokens with its descendants'."""
    ids = store.tree_run_ids(root)
    runs = store.arrow(
        "runs",
        runs=ids,
        columns=["id", "parent_run_id", "depth", "goal", "status", "outcome", "started_at"],
    ).rename_columns(["run_id", "parent_run_id", "depth", "goal", "status", "outcome",
                      "started_at"])  # fmt: skip
    steps = store.arrow("steps", runs=ids, columns=["run_id", "step", "tokens"])
    per_run = steps.group_by("run_id").aggregate([("step", "max"), ("tokens", "sum")])
    per_run = per_run.rename_columns({"step_max": "steps", "tokens_sum": "tokens"})
    calls = store.arrow("provider_calls", runs=ids, columns=["run_id"])
    per_call = (
        calls.group_by("run_id")
        .aggregate([([], "count_all")])
        .rename_columns({"count_all": "provider_calls"})
    )
    table = runs.join(per_run, "run_id", join_type="left outer")
    table = table.join(per_call, "run_id", join_type="left outer").sort_by("run_id")
    for name in ("steps", "tokens", "provider_calls"):
        table = with_column(table, name, filled(table[name], 0))
    run_ids: list[int] = list(table["run_id"].to_pylist())  # type: ignore[arg-type]
    parents: list[int | None] = table["parent_run_id"].to_pylist()
    own: dict[int, int] = dict(zip(run_ids, table["tokens"].to_pylist(), strict=True))  # type: ignore[arg-type]
    totals = dict(own)
    children: dict[int, list[int]] = {}
    for run_id, parent in zip(run_ids, parents, strict=True):
        if run_id != root and parent is not None and parent in own:
            children.setdefault(parent, []).append(run_id)
    order: list[int] = []
    frontier = [root] if root in own else []
    while frontier:  # breadth first from the root; then each run adds into its parent
        order.extend(frontier)
        frontier = [c for r in frontier for c in children.get(r, [])]
    for run_id in reversed(order):
        for child in children.get(run_id, []):
            totals[run_id] += totals[child]
    return table.append_column(
        "tree_tokens", pa.array([totals[r] for r in run_ids], type=pa.int64())
    )
