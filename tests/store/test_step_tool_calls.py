"""A step's several tool calls read as several calls, by upstream's grammar (`name:{json}`
joined with `" | "`), on a store io-harness wrote and on steps the Store writes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from harness_store import StepRecord, Store
from harness_store.formats import step_tool_calls
from harness_store.records import ToolCall

TWO_CALLS = 'spawn_agent:{"goal":"a | grep:{}","n":2} | grep:{"pattern":"x | y"}'


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        ("", ()),
        ('read_file:{"path":"a"}', (("read_file", '{"path":"a"}'),)),
        (
            TWO_CALLS,
            (("spawn_agent", '{"goal":"a | grep:{}","n":2}'), ("grep", '{"pattern":"x | y"}')),
        ),
        ('mcp__fs__read.v2:{"a":[1,{"b":"}"}]}', (("mcp__fs__read.v2", '{"a":[1,{"b":"}"}]}'),)),
        ('{"content":"x","path":"a.txt"}', (("write_file", '{"content":"x","path":"a.txt"}'),)),
        ("a:1 | b:null", (("a", "1"), ("b", "null"))),
    ],
)
def test_calls_are_split_by_the_grammar_not_the_text(
    text: str, calls: tuple[tuple[str, str], ...]
) -> None:
    assert step_tool_calls(text) == calls
    for _, arguments in calls:
        json.loads(arguments)


@pytest.mark.parametrize(
    "text",
    [
        "no tool call",
        'a:{"x":1} |b:{}',
        'a: {"x":1}',
        'a:{"x":1}tail',
        "a:{",
        ":{}",
        "[1]",
        "a:{} | ",
    ],
)
def test_text_in_no_upstream_form_is_not_read_as_calls(text: str) -> None:
    assert step_tool_calls(text) is None
    assert StepRecord.new(1, "d", "r").with_trace("p", text, 0).tool_calls == ()


def test_a_step_written_with_several_calls_reads_back_as_several(store: Store) -> None:
    run = store.start_run("goal", "a.txt")
    store.checkpoint_step(run, StepRecord.new(1, "tools", "ok").with_trace("p", TWO_CALLS, 5))
    (step,) = store.steps(run)
    assert step.tool_call == TWO_CALLS
    assert step.tool_calls == (
        ToolCall("spawn_agent", {"goal": "a | grep:{}", "n": 2}),
        ToolCall("grep", {"pattern": "x | y"}),
    )


def test_the_real_0_29_store_holds_a_step_of_two_spawns(
    fixture_copy: Callable[[str], Path],
) -> None:
    path = fixture_copy("io-harness-0.29.0/interrupted")
    with Store.open(str(path)) as store:
        calls = {s.step: s.tool_calls for s in store.steps(1)}
    assert [c.name for c in calls[1]] == ["spawn_agent", "spawn_agent"]
    assert [c.arguments["verify_file"] for c in calls[1]] == ["a.txt", "b.txt"]
