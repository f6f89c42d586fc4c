"""What `export otlp` sends of values another writer left: a step's tool calls are read by the
one grammar every reader uses (`formats.step_tool_calls`, RFC 8259 JSON), so a call whose
arguments hold NaN is no call here either and every JSON attribute sent is JSON; text whose
bytes are not UTF-8 is refused by name, never sent with U+FFFD in its place."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from support.clirun import run_in_process

from harness_store import ProviderCall, StepRecord, Store, Usage
from harness_store.formats import JSON

from .sink import Sink


def exported(path: Path) -> tuple[Any, list[dict[str, Any]]]:
    """`export otlp` of `path` with content to a loopback receiver: the command's result and
    the attributes of every span sent."""
    sink = Sink.start()
    try:
        done = run_in_process("export", "otlp", path, "--endpoint", sink.url, "--include-content")
    finally:
        sink.stop()
    return done, list(sink.spans.values())


def values_sent(spans: list[dict[str, Any]]) -> list[Any]:
    """Every attribute value sent: the spans' and their events'."""
    return [
        v
        for a in spans
        for attributes in (a, *a["events"])
        for k, v in attributes.items()
        if k != "events"
    ]


def store_with_a_call(path: Path, tool_call: str) -> int:
    """A finished run of one step with `tool_call` (written with `sqlite3`, as a foreign
    writer leaves it) and the provider call that answered it."""
    with Store.open(path, backup=False) as store:
        run = store.start_run("goal", "plan")
        store.checkpoint_step(run, StepRecord(1, "decide", "ok").with_trace("p", "x:{}", 2))
        usage = Usage(prompt_tokens=3, completion_tokens=2)
        store.record_provider_call(run, ProviderCall(1, 0, "prov", "m1", usage))
        store.finish_run(run, "success")
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE steps SET tool_call = ?", [tool_call])
        conn.commit()
    return run


def test_a_call_whose_arguments_hold_nan_is_no_call_and_every_json_sent_is_json(
    tmp_path: Path,
) -> None:
    """Before: the call went out as a tool span and as the chat span's assistant message,
    whose `gen_ai.output.messages` held a bare NaN (Python's reader took it, `json.dumps`
    wrote it back), which no RFC 8259 reader reads."""
    path = tmp_path / "runs.sqlite3"
    written = 'read_file:{"n":NaN} | write_file:{"path":"a"}'
    store_with_a_call(path, written)
    with Store.open(path, read_only=True) as store:
        (step,) = store.steps(1)
        assert step.tool_calls == ()  # the grammar every reader uses
    done, spans = exported(path)
    assert done.returncode == 0, done.stderr
    assert not [a for a in spans if a.get("gen_ai.operation.name") == "execute_tool"]
    sent = [v for v in values_sent(spans) if isinstance(v, str)]
    for value in sent:
        try:
            json.loads(value)
        except ValueError:
            continue  # text, not JSON
        JSON.decode(value)  # and so RFC 8259's too
    assert written in sent  # the step's text, as written
    (chat,) = [a for a in spans if a.get("gen_ai.operation.name") == "chat"]
    (message,) = JSON.decode(chat["gen_ai.output.messages"])
    assert message["parts"] == [{"type": "text", "content": "decide"}]


def test_text_that_is_not_utf8_is_refused_by_name(tmp_path: Path) -> None:
    """Before: sent with U+FFFD in place of the bytes, exit 0."""
    path = tmp_path / "runs.sqlite3"
    store_with_a_call(path, "x:{}")
    with closing(sqlite3.connect(path)) as conn:
        (row,) = conn.execute("SELECT id FROM steps").fetchone()
        conn.execute("UPDATE steps SET result = CAST(X'70FF71' AS TEXT)")
        conn.commit()
    done, spans = exported(path)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("harness-store: error: ") and "Traceback" not in done.stderr
    assert f"steps row id {row}: its result" in line and "not UTF-8" in line, line
    assert not [v for v in values_sent(spans) if isinstance(v, str) and "\ufffd" in v]


def test_a_call_whose_number_no_float_holds_is_sent_as_written(tmp_path: Path) -> None:
    """`1e999` is a JSON number (RFC 8259 sets no range), so the call is one; before, the
    chat span's `gen_ai.output.messages` decoded it to a float and wrote it back as a bare
    `Infinity`, which no RFC 8259 reader reads."""
    path = tmp_path / "runs.sqlite3"
    store_with_a_call(path, 'read_file:{"n":1e999}')
    done, spans = exported(path)
    assert done.returncode == 0, done.stderr
    (chat,) = [a for a in spans if a.get("gen_ai.operation.name") == "chat"]
    messages = chat["gen_ai.output.messages"]
    JSON.decode(messages)
    assert '"arguments": {"n":1e999}' in messages
    (tool,) = [a for a in spans if a.get("gen_ai.operation.name") == "execute_tool"]
    assert tool["gen_ai.tool.call.arguments"] == '{"n":1e999}'
