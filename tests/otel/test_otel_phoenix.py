"""Exporting stores to a real Arize Phoenix and reading the spans back through its REST API:
every run, provider call and tool call once, the parent chain equal to the store's tree, tokens
and models equal, and a second export leaving the same spans."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURE_STORES

from harness_store import Store
from harness_store.otel import export
from harness_store.records import Price, PriceTable

from .big_run import long_run
from .conftest import Phoenix, Span
from .trees import build_tree, calls_and_chat_spans, expected_tool_calls


def by_operation(spans: list[Span], operation: str) -> list[Span]:
    return [s for s in spans if s["attributes"].get("gen_ai.operation.name") == operation]


def assert_matches_store(store: Store, spans: list[Span]) -> None:
    """The spans Phoenix holds are the store's runs, provider calls and tool calls, once each,
    in the store's tree."""
    ids = [s["context"]["span_id"] for s in spans]
    assert len(ids) == len(set(ids)), "a span was stored twice"
    runs = {s["attributes"]["harness.run.id"]: s for s in by_operation(spans, "invoke_agent")}
    assert sorted(runs) == sorted(store.runs())
    assert len(by_operation(spans, "invoke_agent")) == len(runs)
    span_of = {s["context"]["span_id"]: s for s in spans}
    for run_id, span in runs.items():
        parent = store.parent(run_id)
        if parent is None:
            assert span["parent_id"] is None
        else:
            assert span_of[span["parent_id"]]["attributes"]["harness.run.id"] == parent
        root = runs[store.run_root(run_id)]
        assert span["context"]["trace_id"] == root["context"]["trace_id"]
        goals = {n.run_id: n.goal for n in store.tree(store.run_root(run_id))}
        assert span["attributes"]["harness.run.goal"] == goals[run_id]
        assert span["attributes"]["harness.run.status"] == store.status(run_id)
    chats: dict[int, list[Span]] = {}
    tools: Counter[int] = Counter()
    for span in spans:
        if span["parent_id"] is None:
            continue
        parent_run = span_of[span["parent_id"]]["attributes"]["harness.run.id"]
        operation = span["attributes"]["gen_ai.operation.name"]
        if operation == "chat":
            chats.setdefault(parent_run, []).append(span)
        elif operation == "execute_tool":
            tools[parent_run] += 1
    for run_id in runs:
        for call, span in calls_and_chat_spans(store, run_id, chats):
            a = span["attributes"]
            assert a.get("gen_ai.request.model") == call.model
            assert span["name"] == (f"chat {call.model}" if call.model else "chat")
            assert a["gen_ai.provider.name"] == call.provider
            usage = call.usage
            assert a.get("gen_ai.usage.input_tokens") == (usage.prompt_tokens if usage else None)
            assert a.get("gen_ai.usage.output_tokens") == (
                usage.completion_tokens if usage else None
            )
            assert a.get("error.type") == call.failure
        assert tools[run_id] == expected_tool_calls(store, run_id)


def exported(store: Store, phoenix: Phoenix, project: str, **options: Any) -> list[Span]:
    report = export(store, endpoint=phoenix.url, project=project, **options)
    return phoenix.settled(project, report.spans)


@pytest.mark.slow_on("postgresql")
def test_tree_in_phoenix_equals_the_store_and_exports_twice_the_same(
    store_target: str, phoenix: Phoenix, project: str
) -> None:
    with Store.open(store_target) as store:
        roles = build_tree(store)
        report = export(store, endpoint=phoenix.url, project=project)
        spans = phoenix.settled(project, report.spans)
        assert len(spans) == report.spans
        assert_matches_store(store, spans)
        traces = {s["context"]["trace_id"] for s in spans}
        assert len(traces) == 1
        named = {
            s["attributes"].get("gen_ai.agent.name") for s in by_operation(spans, "invoke_agent")
        }
        assert "tester" in named  # the child spawned with a name
        root = next(s for s in spans if s["attributes"].get("harness.run.id") == roles["root"])
        assert root["attributes"]["gen_ai.conversation.id"]
        assert root["span_kind"] == "AGENT"
        events = Counter(e["name"] for e in root["events"])
        assert events["harness.step"] == 3
        assert events["harness.policy_decision"] == 1
        assert events["harness.approval"] == 1
        assert events["harness.sandbox"] == 1
        assert events["harness.checkpoint"] == 3

        again = export(store, endpoint=phoenix.url, project=project)
        assert again.spans == report.spans
        after = phoenix.settled(project, report.spans)
        assert sorted(s["context"]["span_id"] for s in after) == sorted(
            s["context"]["span_id"] for s in spans
        )


def test_content_is_sent_only_when_asked(tmp_path: Path, phoenix: Phoenix, project: str) -> None:
    with Store.open(tmp_path / "runs.sqlite3") as store:
        build_tree(store)
        plain = exported(store, phoenix, project)
        assert not [s for s in plain if "gen_ai.tool.call.arguments" in s["attributes"]]
        assert not [
            e for s in plain for e in s["events"] if "harness.step.prompt" in e["attributes"]
        ]
        # Phoenix keeps the first copy of a span id: the second export is another identity's
        full = exported(store, phoenix, project + "-c", include_content=True, identity="content")
        arguments = {
            s["attributes"]["gen_ai.tool.call.arguments"]
            for s in full
            if "gen_ai.tool.call.arguments" in s["attributes"]
        }
        assert '{"path":"f1.txt"}' in arguments


def test_run_and_since_choose_what_is_sent(tmp_path: Path, phoenix: Phoenix, project: str) -> None:
    with Store.open(tmp_path / "runs.sqlite3") as store:
        roles = build_tree(store)
        report = export(store, endpoint=phoenix.url, project=project, runs=[roles["a"]])
        spans = phoenix.settled(project, report.spans)
        runs = sorted(
            s["attributes"]["harness.run.id"] for s in by_operation(spans, "invoke_agent")
        )
        assert runs == sorted([roles["a"], roles["g"]])
        later = export(store, endpoint=phoenix.url, project=project + "-x", since="2999-01-01")
        assert later.runs == later.spans == 0


def test_two_stores_never_share_span_ids(tmp_path: Path, phoenix: Phoenix, project: str) -> None:
    """The same run ids in two stores are two traces: a trace id mixes in its root run's start
    stamp and goal, not only its id."""
    with Store.open(tmp_path / "one.sqlite3") as one, Store.open(tmp_path / "two.sqlite3") as two:
        build_tree(one)
        build_tree(two)
        a = export(one, endpoint=phoenix.url, project=project)
        b = export(two, endpoint=phoenix.url, project=project)
        spans = phoenix.settled(project, a.spans + b.spans)
        assert len(spans) == a.spans + b.spans
        assert len({s["context"]["trace_id"] for s in spans}) == 2


@pytest.mark.parametrize("name", FIXTURE_STORES)
def test_real_fixture_stores_after_upgrade(
    name: str, fixture_copy: Any, phoenix: Phoenix, project: str
) -> None:
    path = fixture_copy(name)
    with Store.open(path) as store:
        assert store.runs(), "the fixture holds runs"
        spans = exported(store, phoenix, project)
        assert_matches_store(store, spans)


def test_a_copied_store_sends_the_same_spans(
    tmp_path: Path, phoenix: Phoenix, project: str
) -> None:
    """The identity travels with the store: a copy elsewhere exports the very same span ids."""
    original = tmp_path / "runs.sqlite3"
    with Store.open(original) as store:
        build_tree(store)
        first = export(store, endpoint=phoenix.url, project=project)
    moved = tmp_path / "elsewhere" / "copy.sqlite3"
    moved.parent.mkdir()
    shutil.copyfile(original, moved)
    with Store.open(moved, read_only=True) as copy:
        second = export(copy, endpoint=phoenix.url, project=project)
    assert second.spans == first.spans
    spans = phoenix.settled(project, first.spans)
    assert len(spans) == first.spans


def test_priced_cost_rides_on_the_spans(tmp_path: Path, phoenix: Phoenix, project: str) -> None:
    prices = PriceTable.new("2026-08-01").with_(
        "claude-sonnet-4-5", Price(input=3_000_000, output=15_000_000)
    )
    with Store.open(tmp_path / "runs.sqlite3") as store:
        roles = build_tree(store)
        spans = exported(store, phoenix, project, prices=prices)
        expected = [
            prices.cost_micros(c.model, c.usage)
            for c in store.provider_calls(roles["root"])
            if c.model and c.usage
        ]
    root = next(s for s in spans if s["attributes"].get("harness.run.id") == roles["root"])
    chats = [s for s in by_operation(spans, "chat") if s["parent_id"] == root["context"]["span_id"]]
    assert sorted(s["attributes"]["harness.cost.micros"] for s in chats) == sorted(expected)
    assert root["attributes"]["harness.cost.micros"] == sum(x for x in expected if x)
    assert root["attributes"]["harness.cost.prices_as_of"] == "2026-08-01"
    child = next(s for s in spans if s["attributes"].get("harness.run.id") == roles["b"])
    assert child["attributes"]["harness.cost.unpriced_calls"] == 3  # gpt-5 has no price


def test_a_long_run_sent_over_many_requests_is_one_whole_trace_in_phoenix(
    tmp_path: Path, phoenix: Phoenix, project: str
) -> None:
    """A run of 1,200 steps, sent in requests of at most 64 KiB (dozens of them): Phoenix
    holds every span once, in one trace, each under the run's span, and every step's event on
    the run's span or one of its `harness.events` spans."""
    path = tmp_path / "long.sqlite3"
    run = long_run(path, 1_200)
    with Store.open(path, read_only=True) as store:
        report = export(store, endpoint=phoenix.url, project=project, max_request_bytes=65_536)
    assert report.requests > 10
    spans = phoenix.settled(project, report.spans)
    assert len(spans) == report.spans
    assert len({s["context"]["span_id"] for s in spans}) == len(spans)
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    (agent,) = by_operation(spans, "invoke_agent")
    assert agent["attributes"]["harness.run.id"] == run and agent["parent_id"] is None
    children = [s for s in spans if s is not agent]
    assert {s["parent_id"] for s in children} == {agent["context"]["span_id"]}
    assert len(by_operation(spans, "chat")) == len(by_operation(spans, "execute_tool")) == 1_200
    pages = [s for s in spans if s["name"] == "harness.events"]
    assert len(pages) > 1
    steps = sorted(
        e["attributes"]["harness.step"]
        for s in [agent, *pages]
        for e in s["events"]
        if e["name"] == "harness.step"
    )
    assert steps == list(range(1, 1_201))
