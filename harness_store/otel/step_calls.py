"""What a span carries of a step's text: the step's tool calls, read by io-harness's grammar,
and a model call's prompt and completion as the GenAI conventions and OpenInference say them."""

from __future__ import annotations

import json

from opentelemetry.util.types import AttributeValue

from ..formats import step_tool_calls
from ..store.trace_export import SpanStep

Attributes = dict[str, AttributeValue]


def step_calls(tool_call: str) -> tuple[tuple[str, str], ...]:
    """A step's `tool_call` as its calls, each `(name, arguments)`, read by the one grammar
    every reader uses (`formats.step_tool_calls`: io-harness's `name:{json} | name:{json}`
    and its single-file loop's bare `write_file` arguments, each arguments text RFC 8259
    JSON), so a span's tool calls are `StepRecord.tool_calls` and a Parquet row's. Text in no
    form of it is no call; the step's event carries it as written (`step_event`)."""
    return step_tool_calls(tool_call) or ()


def _dumped(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _call_part(name: str, arguments: str) -> str:
    """A tool call as a message part, its arguments the JSON text as written (RFC 8259, by
    the grammar): decoded and encoded again, a number past a float's range (`1e999`) would
    come back as a bare `Infinity`, which is no JSON."""
    return '{"type": "tool_call", "name": ' + _dumped(name) + ', "arguments": ' + arguments + "}"


def chat_content(
    a: Attributes,
    step: SpanStep,
    calls: tuple[tuple[str, str], ...] | None,
    finish_reason: str | None,
) -> None:
    """A model call's prompt and completion, as the GenAI conventions (`gen_ai.input.messages`,
    `gen_ai.output.messages`, which MLflow reads) and OpenInference (`input.value`,
    `llm.input_messages.*`, which Phoenix reads) say them: the step's prompt as the user's
    message, and, for a call that did not fail (`calls` not None), the step's tool calls as
    the assistant's answer (its decision when it called no tool)."""
    if step.prompt:
        a["gen_ai.input.messages"] = json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": step.prompt}]}],
            ensure_ascii=False,
        )
        a["input.value"] = step.prompt
        a["input.mime_type"] = "text/plain"
        a["llm.input_messages.0.message.role"] = "user"
        a["llm.input_messages.0.message.content"] = step.prompt
    if calls is None:
        return
    text = step.tool_call if calls else step.decision
    if not calls and not step.decision:
        return
    parts = [_call_part(name, arguments) for name, arguments in calls] or [
        _dumped({"type": "text", "content": step.decision})
    ]
    finish = finish_reason or ("tool_call" if calls else "stop")
    a["gen_ai.output.messages"] = (
        '[{"role": "assistant", "parts": ['
        + ", ".join(parts)
        + '], "finish_reason": '
        + _dumped(finish)
        + "}]"
    )
    a["output.value"] = text
    a["output.mime_type"] = "text/plain"
    a["llm.output_messages.0.message.role"] = "assistant"
    if not calls:
        a["llm.output_messages.0.message.content"] = text
    for i, (name, arguments) in enumerate(calls):
        key = f"llm.output_messages.0.message.tool_calls.{i}.tool_call.function"
        a[f"{key}.name"] = name
        a[f"{key}.arguments"] = arguments
