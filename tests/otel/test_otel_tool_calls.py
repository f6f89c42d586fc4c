"""A step's several tool calls (io-harness joins them as `name:{json} | name:{json}`) reach a
real Phoenix as several `execute_tool` spans, each with its own name and arguments: on the real
0.29 store whose coordinator step spawned two agents, and on a step whose argument holds " | "."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness_store import Store
from harness_store.records import StepRecord

from .conftest import Phoenix, Span
from .test_otel_phoenix import assert_matches_store, by_operation, exported


def step_tools(spans: list[Span], step: int, run_id: int) -> list[Span]:
    """The tool spans read from one step's `tool_call` under the run's span."""
    runs = {s["attributes"]["harness.run.id"]: s for s in by_operation(spans, "invoke_agent")}
    parent = runs[run_id]["context"]["span_id"]
    return sorted(
        (
            s
            for s in by_operation(spans, "execute_tool")
            if s["parent_id"] == parent
            and s["attributes"]["harness.tool.source"] == "steps"
            and s["attributes"]["harness.tool.step"] == step
        ),
        key=lambda s: s["attributes"]["gen_ai.tool.call.id"],
    )


def test_the_real_fixture_coordinator_step_is_two_spawn_spans(
    fixture_copy: Any, phoenix: Phoenix, project: str
) -> None:
    path = fixture_copy("io-harness-0.29.0/interrupted")
    with Store.open(path) as store:
        (step,) = [s for s in store.steps(1) if s.step == 1]
        assert " | spawn_agent:" in step.tool_call  # what the fixture holds
        # Phoenix keeps the first copy of a span id in any project: an identity of this test's own
        spans = exported(store, phoenix, project, include_content=True, identity="tool-calls")
        assert_matches_store(store, spans)
    tools = step_tools(spans, 1, 1)
    assert [t["attributes"]["gen_ai.tool.name"] for t in tools] == ["spawn_agent"] * 2
    goals = [json.loads(t["attributes"]["gen_ai.tool.call.arguments"])["goal"] for t in tools]
    assert goals == ["FILE=a.txt CONTENT=ALPHA", "FILE=b.txt CONTENT=DRAFT"]
    assert len({t["attributes"]["gen_ai.tool.call.id"] for t in tools}) == 2


def test_a_separator_inside_an_argument_stays_in_it(
    tmp_path: Path, phoenix: Phoenix, project: str
) -> None:
    calls = 'shell:{"cmd":"grep -c x a.txt | wc -l"} | read_file:{"path":"a | b.txt"}'
    with Store.open(tmp_path / "runs.sqlite3") as store:
        run = store.start_run("count", "/repo")
        store.checkpoint_step(run, StepRecord.new(1, "ran", "3").with_trace("p", calls, 5))
        store.checkpoint_step(  # the single-file loop records write_file's bare arguments
            run, StepRecord.new(2, "wrote", "ok").with_trace("p", '{"path":"o | k"}', 5)
        )
        store.finish_run(run, "success")
        spans = exported(store, phoenix, project, include_content=True)
        assert_matches_store(store, spans)
    first = step_tools(spans, 1, run)
    assert [t["attributes"]["gen_ai.tool.name"] for t in first] == ["shell", "read_file"]
    assert [json.loads(t["attributes"]["gen_ai.tool.call.arguments"]) for t in first] == [
        {"cmd": "grep -c x a.txt | wc -l"},
        {"path": "a | b.txt"},
    ]
    (second,) = step_tools(spans, 2, run)
    assert second["attributes"]["gen_ai.tool.name"] == "write_file"
    assert json.loads(second["attributes"]["gen_ai.tool.call.arguments"]) == {"path": "o | k"}
