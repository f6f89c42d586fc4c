"""The numbers `harness-store` prints are the Store's: tokens, steps and spend of every kind
of run (steps only, a reply turn with provider calls and no steps, calls and steps, a child,
an empty run), on both backends."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from sqlalchemy import create_engine, text
from support.clirun import run_in_process

from harness_store import Store
from harness_store.records import PriceTable, ProviderCall, StepRecord, Usage
from harness_store.store.listings import Listings
from harness_store.store.trace_view import TraceView


def call(step: int, tokens: int, model: str = "m1") -> ProviderCall:
    usage = Usage(prompt_tokens=tokens - 5, completion_tokens=5, total_tokens=tokens)
    return ProviderCall(step=step, provider="p", model=model, usage=usage, latency_ms=3)


def every_kind_of_run(target: str) -> dict[str, int]:
    """A store holding one run of each kind; their ids by kind."""
    with Store.open(target) as store:
        stepped = store.start_run("steps only", "a.md")
        for n in (1, 2, 3):
            store.checkpoint_step(stepped, StepRecord(step=n, decision="d", result="r", tokens=7))
        reply = store.start_run("a reply turn", "b.md")
        store.record_provider_call(reply, call(0, 15))
        both = store.start_run("steps and calls", "c.md")
        store.checkpoint_step(both, StepRecord(step=1, decision="d", result="r", tokens=11))
        store.record_provider_call(both, call(1, 40, "m2"))
        child = store.start_child_run("a child", "d.md", both, 1)
        store.checkpoint_step(child, StepRecord(step=1, decision="d", result="r", tokens=2))
        empty = store.start_run("nothing yet", "e.md")
    engine = create_engine(target if "://" in target else f"sqlite:///{target}")
    with engine.begin() as conn:  # what upstream 0.37+ writes for a session's reply turn
        conn.execute(text("UPDATE runs SET turn_kind = 'reply' WHERE id = :id"), {"id": reply})
    engine.dispose()
    return {"stepped": stepped, "reply": reply, "both": both, "child": child, "empty": empty}


def test_runs_tokens_and_steps_are_the_stores(store_target: str) -> None:
    runs = every_kind_of_run(store_target)
    ran = run_in_process("runs", store_target, "--all", "--json")
    assert ran.returncode == 0, ran
    printed = {row["run_id"]: row for row in json.loads(ran.stdout)}
    with Store.open(store_target, read_only=True) as store:
        for kind, run in runs.items():
            assert printed[run]["tokens"] == store.spent_tokens(run), kind
            assert printed[run]["steps"] == store.last_step(run), kind
        assert printed[runs["reply"]]["tokens"] == 15


@pytest.mark.slow_on("postgresql")
def test_tree_totals_are_the_stores(store_target: str) -> None:
    runs = every_kind_of_run(store_target)
    ran = run_in_process("tree", store_target, str(runs["both"]), "--json")
    assert ran.returncode == 0, ran
    with Store.open(store_target, read_only=True) as store:
        nodes = {n.run_id: n for n in store.tree(runs["both"])}
        document = json.loads(ran.stdout)
    shown = {n["run_id"]: n for n in document["nodes"]}
    assert set(shown) == set(nodes)
    for run_id, node in nodes.items():
        assert shown[run_id]["tokens"] == node.tokens
        assert shown[run_id]["steps"] == node.steps


def test_spend_is_the_stores(store_target: str) -> None:
    every_kind_of_run(store_target)
    prices = PriceTable.new("none")
    with Store.open(store_target, read_only=True) as store:
        expected = {
            by: [asdict(s) for s in getattr(store, f"spend_by_{by}")(prices)]
            for by in ("model", "day", "run")
        }
    for by, rows in expected.items():
        ran = run_in_process("spend", store_target, "--by", by, "--json")
        assert ran.returncode == 0, ran
        shown = json.loads(ran.stdout)
        flat = [{"key": r["key"], "calls": r["calls"], **r["usage"],
                 "cost_micros": r["cost_micros"], "unpriced_calls": r["unpriced_calls"]}
                for r in rows]  # fmt: skip
        assert shown["groups"] == flat


@pytest.mark.slow_on("postgresql")
def test_trace_tokens_and_entries_are_the_stores(store_target: str) -> None:
    """Each kind of run's whole trace sums to `spent_tokens` (a reply turn's tokens are its
    provider calls'), in the JSON, the JSON Lines and the table alike; and the entries the
    command prints are `TraceView.entries`' own."""
    runs = every_kind_of_run(store_target)
    with Store.open(store_target, read_only=True) as store:
        spent = {kind: store.spent_tokens(run) for kind, run in runs.items()}
        entries = {kind: list(TraceView(store).entries(run)) for kind, run in runs.items()}
    assert spent["reply"] == 15
    for kind, run in runs.items():
        document = json.loads(run_in_process("trace", store_target, str(run), "--json").stdout)
        assert document["tokens"] == spent[kind], kind
        assert document["entries"] == [
            {"type": e.kind, "step": e.step, **e.fields} for e in entries[kind]
        ], kind
        lines = run_in_process("trace", store_target, str(run), "--jsonl").stdout.splitlines()
        assert json.loads(lines[-1])["tokens"] == spent[kind], kind
        table = run_in_process("trace", store_target, str(run)).stdout.splitlines()[1:]
        shown = sum(int(c.replace(",", "")) for c in (row.split()[2] for row in table[1:])
                    if c.replace(",", "").isdigit())  # fmt: skip
        assert shown == spent[kind], (kind, table)


@pytest.mark.slow_on("postgresql")
def test_inspect_runs_and_memory_listings_are_the_stores(store_target: str) -> None:
    """The rows per table `inspect` prints, the runs `runs` lists and the workspaces `memory`
    names are what the Store returns."""
    runs = every_kind_of_run(store_target)
    with Store.open(store_target) as store:
        store.memory_put("/repo", "k", "v", runs["stepped"], 1)
    with Store.open(store_target, read_only=True) as store:
        counts = Listings(store).row_counts()
        listed = Listings(store).run_page(limit=100)
        total = Listings(store).count_runs()
        workspaces = Listings(store).memory_workspaces()
        journal = Listings(store).journal_mode()
    inspected = json.loads(run_in_process("inspect", store_target, "--json").stdout)
    assert inspected["tables"] == counts
    if journal is not None:  # a SQLite file: its mode as the file says (still read: wal)
        assert inspected["journal_mode"] in (journal, "wal")
    shown = json.loads(run_in_process("runs", store_target, "--all", "--json").stdout)
    assert [r["run_id"] for r in shown] == [r.run_id for r in listed] and len(shown) == total
    for row, run in zip(shown, listed, strict=True):
        assert (row["status"], row["goal"], row["success"]) == (run.status, run.goal, run.success)
    other = run_in_process("memory", store_target, "/nowhere")
    assert all(w in other.stdout + other.stderr for w in workspaces)
