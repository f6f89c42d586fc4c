"""Exporting stores to a real MLflow tracking server (its OTLP endpoint `/v1/traces`, the
experiment chosen by the `x-mlflow-experiment-id` header) and reading the spans back through
MLflow's own client: one trace per tree, every run, provider call and tool call once under its
parent, tokens equal to the store's, and with `--include-content` the inputs and outputs MLflow
shows equal to the store's prompts, calls, arguments and results."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.clirun import run_cli

from harness_store import Store
from harness_store.otel import export

from .big_run import long_run
from .conftest import Mlflow, Span
from .trees import build_tree, calls_and_chat_spans, expected_tool_calls

HEADER = "x-mlflow-experiment-id"


def operation(span: Span) -> Any:
    return span["attributes"].get("gen_ai.operation.name")


def sent(store: Store, mlflow: Mlflow, experiment: str, **options: Any) -> list[Span]:
    report = export(
        store, endpoint=mlflow.url + "/v1/traces", headers={HEADER: experiment}, timeout=120,
        **options,
    )  # fmt: skip
    spans = mlflow.settled(experiment, report.spans)
    assert len(spans) == report.spans
    return spans


def assert_tree_matches(store: Store, spans: list[Span]) -> dict[int, Span]:
    """MLflow holds the store's runs, provider calls and tool calls once each, in the store's
    tree, one trace per root, with the store's tokens; returns the run spans by run id."""
    assert len({s["span_id"] for s in spans}) == len(spans)
    runs = {s["attributes"]["harness.run.id"]: s for s in spans if operation(s) == "invoke_agent"}
    assert sorted(runs) == sorted(store.runs())
    by_id = {s["span_id"]: s for s in spans}
    roots = {r for r in runs if store.parent(r) is None}
    assert len({s["trace"] for s in spans}) == len(roots)
    for run_id, span in runs.items():
        parent = store.parent(run_id)
        if parent is None:
            assert span["parent_id"] is None
        else:
            assert span["parent_id"] == runs[parent]["span_id"]
        assert span["trace"] == runs[store.run_root(run_id)]["trace"]
        assert span["span_type"] == "AGENT"
    chats: dict[int, list[Span]] = {}
    tools: Counter[int] = Counter()
    for span in spans:
        if operation(span) == "invoke_agent":
            continue
        run_id = by_id[span["parent_id"]]["attributes"]["harness.run.id"]
        if operation(span) == "chat":
            chats.setdefault(run_id, []).append(span)
        else:
            assert span["span_type"] == "TOOL"
            tools[run_id] += 1
    for run_id in runs:
        for call, span in calls_and_chat_spans(store, run_id, chats):
            a = span["attributes"]
            assert a.get("mlflow.llm.model") == call.model
            if call.usage is not None:
                assert a["mlflow.chat.tokenUsage"] == {
                    "input_tokens": call.usage.prompt_tokens,
                    "output_tokens": call.usage.completion_tokens,
                    "total_tokens": call.usage.total_tokens,
                }
        assert tools[run_id] == expected_tool_calls(store, run_id)
    return runs


@pytest.mark.slow_on("postgresql")
def test_tree_in_mlflow_equals_the_store(store_target: str, mlflow: Mlflow) -> None:
    experiment = mlflow.experiment()
    with Store.open(store_target) as store:
        build_tree(store)
        spans = sent(store, mlflow, experiment)
        assert_tree_matches(store, spans)
    assert not [s for s in spans if s["inputs"] is not None and operation(s) != "invoke_agent"]


def test_content_in_mlflow_equals_the_store(tmp_path: Path, mlflow: Mlflow) -> None:
    """With content, every chat span shows its step's prompt as input and the calls the model
    answered with as output; every tool span its arguments and result."""
    experiment = mlflow.experiment()
    with Store.open(tmp_path / "runs.sqlite3") as store:
        roles = build_tree(store)
        spans = sent(store, mlflow, experiment, include_content=True)
        runs = assert_tree_matches(store, spans)
        by_id = {s["span_id"]: s for s in spans}
        chats = [s for s in spans if operation(s) == "chat"]
        assert len(chats) == 9
        for chat in chats:
            run_id = by_id[chat["parent_id"]]["attributes"]["harness.run.id"]
            number = chat["attributes"]["harness.provider_call.step"]
            (step,) = [s for s in store.steps(run_id) if s.step == number]
            assert chat["inputs"] == step.prompt
            if chat["attributes"].get("error.type"):
                assert chat["outputs"] is None
            else:
                assert chat["outputs"] == (step.tool_call or step.decision)
                messages = chat["attributes"]["gen_ai.output.messages"]  # read back decoded
                assert [
                    (p["name"], p["arguments"]) for p in messages[0]["parts"] if "name" in p
                ] == [(c.name, c.arguments) for c in step.tool_calls]
        tools = [
            s
            for s in spans
            if operation(s) == "execute_tool" and s["attributes"]["harness.tool.source"] == "steps"
        ]
        assert tools
        for tool in tools:
            run_id = by_id[tool["parent_id"]]["attributes"]["harness.run.id"]
            number = tool["attributes"]["harness.tool.step"]
            (step,) = [s for s in store.steps(run_id) if s.step == number]
            assert tool["inputs"] == step.tool_calls[0].arguments
            assert tool["outputs"] == step.result
        root = runs[roles["root"]]
        assert root["inputs"] == "fix the failing test"


def test_a_second_destination_with_its_own_identity_gets_its_own_traces(
    tmp_path: Path, mlflow: Mlflow
) -> None:
    """MLflow keys traces by id across experiments: without content to A, then with content
    to B under another `--identity`, B holds every span with content and A none."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        build_tree(store)
    a, b = mlflow.experiment(), mlflow.experiment()
    url = mlflow.url + "/v1/traces"
    first = run_cli("export", "otlp", path, "--endpoint", url, "--header", f"{HEADER}={a}",
                    "--timeout", "120")  # fmt: skip
    assert first.returncode == 0, first.stderr
    second = run_cli("export", "otlp", path, "--endpoint", url, "--header", f"{HEADER}={b}",
                     "--include-content", "--identity", "B", "--timeout", "120")  # fmt: skip
    assert second.returncode == 0, second.stderr
    in_b = mlflow.settled(b, 22)
    assert len(in_b) == 22
    assert [s for s in in_b if operation(s) == "chat" and s["inputs"]]
    in_a = mlflow.settled(a, 22)
    assert len(in_a) == 22
    assert not [s for s in in_a if operation(s) != "invoke_agent" and s["inputs"] is not None]
    assert not {s["trace_id"] for s in in_a} & {s["trace_id"] for s in in_b}


def test_a_long_run_sent_over_many_requests_is_one_whole_trace_in_mlflow(
    tmp_path: Path, mlflow: Mlflow
) -> None:
    """A run of 600 steps, sent in requests of at most 32 KiB (dozens of them, the run's own
    span in the last): MLflow puts every span in one trace, once, each under the run's span."""
    path = tmp_path / "long.sqlite3"
    run = long_run(path, 600)
    experiment = mlflow.experiment()
    with Store.open(path, read_only=True) as store:
        spans = sent(store, mlflow, experiment, max_request_bytes=32_768)
    pages = [s for s in spans if s["name"] == "harness.events"]
    assert len(pages) > 1
    assert len({s["span_id"] for s in spans}) == len(spans) == 2 * 600 + 1 + len(pages)
    assert len({s["trace"] for s in spans}) == 1
    (agent,) = [s for s in spans if operation(s) == "invoke_agent"]
    assert agent["attributes"]["harness.run.id"] == run and agent["parent_id"] is None
    assert {s["parent_id"] for s in spans if s is not agent} == {agent["span_id"]}
    assert Counter(operation(s) for s in spans if s is not agent) == Counter(
        {"chat": 600, "execute_tool": 600, None: len(pages)}
    )
