"""What a span carries of a step's text: the step's tool calls, read by io-harness's grammar,
and a model call's prompt and completion as the GenAI conventions and OpenInference say them."""

from __future__ import annotations

import json

from opentelemetry.util.types import AttributeValue

from ..formats import step_tool_calls
from ..store.export_reads import SpanStep

Attributes = dict[str, AttributeValue]


def step_calls(tool_call: str) -> tuple[tuple[str, str], ...]:
    """A step's `tool_call` as its calls, each `(name, arguments)`: io-harness joins a step's
    calls as `name:{json} | name:{json}` (and its single-file loop writes `write_file`'s bare
    arguments), read by that grammar (`formats.step_tool_calls`). Other text is one call named
    by what stands before its first colon, its arguments the rest as written; text that
    starts as a JSON object but is not one is no call."""
    calls = step_tool_calls(tool_call)
    if calls is not None:
        return calls
    text = tool_call.strip()
    if text.startswith("{"):  # the single-file loop's arguments, cut short: no name to give
        return ()
    name, _, arguments = text.partition(":")
    return ((name.strip(), arguments),) if name.strip() else ()


def _arguments(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text


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
    parts: list[dict[str, object]] = [
        {"type": "tool_call", "name": name, "arguments": _arguments(arguments)}
        for name, arguments in calls
    ]
    text = step.tool_call if calls else step.decision
    if not calls:
        if not step.decision:
            return
        parts = [{"type": "text", "content": step.decision}]
    message: dict[str, object] = {"role": "assistant", "parts": parts}
    message["finish_reason"] = finish_reason or ("tool_call" if calls else "stop")
    a["gen_ai.output.messages"] = json.dumps([message], ensure_ascii=False)
    a["output.value"] = text
    a["output.mime_type"] = "text/plain"
    a["llm.output_messages.0.message.role"] = "assistant"
    if not calls:
        a["llm.output_messages.0.message.content"] = text
    for i, (name, arguments) in enumerate(calls):
        key = f"llm.output_messages.0.message.tool_calls.{i}.tool_call.function"
        a[f"{key}.name"] = name
        a[f"{key}.arguments"] = arguments
