"""A run's rows as OpenTelemetry spans, following the GenAI semantic conventions v1.44.0
(`SEMCONV_SCHEMA`, still "Development") and OpenInference's span kinds, so Phoenix, Jaeger,
Langfuse and MLflow draw a run tree with its model calls and tool calls.

Every id is derived from the store's identity and row ids (`ids.SpanIds`): exporting the same
rows again sends the same trace and span ids. Times come from the store's own stamps
(`times`). A run's provider calls are read a page at a time ahead of its steps
(`provider_calls`), and its events go out a page a span (`event_pages`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import AttributeValue

from ..records import PriceTable
from ..store.trace_export import (
    RunRows,
    SpanEventRow,
    SpanMcpEvent,
    SpanProviderCall,
    SpanRun,
    SpanServerToolCall,
    SpanStep,
    SpanToolAttempt,
)
from .event_pages import EVENT_BYTES_PER_SPAN, EventPages
from .ids import SpanIds
from .provider_calls import CallPages, CallsAhead, Cost, calls_in, earliest, usage_of
from .step_calls import chat_content, step_calls
from .times import StepClock, stamp_ns

SEMCONV_VERSION = "1.44.0"
"""The version of the OpenTelemetry semantic conventions (GenAI included) this mapping follows."""

SEMCONV_SCHEMA = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

SCOPE_NAME = "harness_store.otel"

SPAN_KIND = "openinference.span.kind"

EVENT_NAMES = {
    "policy_events": "harness.policy_decision",
    "pending_approvals": "harness.approval",
    "sandbox_events": "harness.sandbox",
    "checkpoint_events": "harness.checkpoint",
    "agent_events": "harness.agent",
    "gate_attempts": "harness.gate",
}
"""The span event each store table's rows become on their run's span."""

STEP_WINDOW = 2000
"""Steps a run's spans are built from at a time, with their provider calls."""

Attributes = dict[str, AttributeValue]


@dataclass(frozen=True)
class MappingOptions:
    """What the mapping adds beyond ids and counts."""

    include_content: bool = False
    """Prompts, results and tool arguments (they can hold secrets): off unless asked for."""
    prices: PriceTable | None = None
    """Prices for `harness.cost.*`; without one no cost attribute is set."""
    event_bytes: int = EVENT_BYTES_PER_SPAN
    """About how many bytes of events one span carries at most (`EventPages`)."""


def resource(identity: str, project: str) -> Resource:
    """The resource every exported span carries: io-harness as the service, the Phoenix
    project to file the traces under, and the export's identity when one was given."""
    attributes: Attributes = {"service.name": "io-harness", "openinference.project.name": project}
    _set(attributes, "harness.export.identity", identity)
    return Resource(attributes, schema_url=SEMCONV_SCHEMA)


def scope(version: str) -> InstrumentationScope:
    """The instrumentation scope of the exported spans."""
    return InstrumentationScope(SCOPE_NAME, version, SEMCONV_SCHEMA)


def _set(attributes: Attributes, key: str, value: AttributeValue | None) -> None:
    if value is not None and value != "":
        attributes[key] = value


class RunSpans:
    """Builds one run's spans: an `invoke_agent` span and its `chat` and `execute_tool` spans."""

    def __init__(
        self, ids: SpanIds, res: Resource, instrumentation: InstrumentationScope,
        options: MappingOptions,
    ) -> None:  # fmt: skip
        self.ids = ids
        self.resource = res
        self.scope = instrumentation
        self.options = options

    def _context(self, trace_id: int, span_id: int) -> SpanContext:
        return SpanContext(trace_id, span_id, False, TraceFlags(TraceFlags.SAMPLED))

    def _span(
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        attributes: Attributes,
        start: int,
        end: int,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        status: Status | None = None,
        events: list[Event] | None = None,
    ) -> ReadableSpan:
        return ReadableSpan(
            name=name,
            context=context,
            parent=parent,
            resource=self.resource,
            attributes=attributes,
            events=events or (),
            kind=kind,
            status=status or Status(StatusCode.UNSET),
            start_time=start,
            end_time=max(end, start),
            instrumentation_scope=self.scope,
        )

    def run_span_id(self, trace_id: int, run_id: int) -> int:
        """The span id of a run's `invoke_agent` span."""
        return self.ids.span(trace_id, "runs", run_id)

    def spans(
        self, rows: RunRows, root: SpanRun, calls: CallPages | None = None
    ) -> Iterator[ReadableSpan]:
        """The run's child spans as they are built, then the run's own span last; `root` is
        the root run of its tree (the run itself for a root). The steps are taken
        `STEP_WINDOW` at a time, and the provider calls a page at a time in row order by
        `calls` (by default from `rows.provider_calls`), read ahead until a call of a later
        step than the window's last: a step's calls go out beside it, a call whose step was
        never recorded after the steps, and a long run is never held whole."""
        run = rows.run
        read = calls or calls_in(rows.provider_calls)
        trace_id = self.ids.trace(root.id, root.started_at, root.goal)
        run_context = self._context(trace_id, self.run_span_id(trace_id, run.id))
        when = StepClock(rows, lambda: earliest(read))
        attempts_at = {(a.step, a.tool) for a in rows.tool_attempts}
        cost = Cost()
        ahead = CallsAhead(read, when.later)
        events = EventPages(self, trace_id, run_context, run.id)
        steps = tokens = 0
        pending = iter(rows.steps)
        while window := list(islice(pending, STEP_WINDOW)):
            top = max(step.step for step in window)
            when.take(ahead.through(top), top)
            for step in window:
                steps = max(steps, step.step)
                tokens += step.tokens
                calls_made = step_calls(step.tool_call)
                yield from events.add(self.step_event(step, calls_made, when.at(step.step)))
                for call in ahead.waiting.pop(step.step, ()):
                    # a step's provider calls were asked its prompt and answered its calls
                    content = (step, calls_made) if self.options.include_content else None
                    span, priced = self.chat_span(call, trace_id, run_context, when, content)
                    cost.add(priced)
                    yield span
                for index, (name, arguments) in enumerate(calls_made):
                    if (step.step, name) in attempts_at:
                        when.keep_step(step, name, arguments)
                    else:
                        yield self.step_tool_span(
                            step, index, name, arguments, trace_id, run_context, when
                        )
        when.take(ahead.through(None), None)
        for left in ahead.waiting.values():  # provider calls of steps never recorded
            for call in left:
                span, priced = self.chat_span(call, trace_id, run_context, when, None)
                cost.add(priced)
                yield span
        for server in rows.server_tool_calls:
            yield self.server_tool_span(server, trace_id, run_context, when)
        for mcp in rows.mcp_events:
            if mcp.kind == "call" or mcp.tool:
                yield self.mcp_span(mcp, trace_id, run_context, when)
        for attempt in rows.tool_attempts:
            yield self.tool_attempt_span(attempt, run.id, trace_id, run_context, when)
        for row in rows.event_rows:
            yield from events.add(self.row_event(row, when))
        yield from events.close()
        yield self.run_span(
            rows, run_context, events.first, when, steps, tokens, cost.micros, cost.unpriced
        )

    def events_span(
        self, trace_id: int, parent: SpanContext, run_id: int, page: int, events: list[Event]
    ) -> ReadableSpan:
        """A `harness.events` span under a run's span: the `page`-th page (from 2: the first
        is the run's own span's) of the run's events, as long as their times."""
        a: Attributes = {
            "harness.run.id": run_id,
            "harness.events.page": page,
            "harness.events.count": len(events),
        }
        times = [e.timestamp for e in events]
        context = self._context(trace_id, self.ids.span(trace_id, "run_events", run_id, page))
        return self._span(
            "harness.events", context, parent, a, min(times), max(times), events=events
        )

    def run_span(
        self,
        rows: RunRows,
        context: SpanContext,
        events: list[Event],
        when: StepClock,
        steps: int,
        tokens: int,
        cost: int,
        unpriced: int,
    ) -> ReadableSpan:
        """The run's `invoke_agent` span, under its parent run's span when it was spawned."""
        run = rows.run
        name = run.spawn_name or ("io-harness" if run.parent_run_id is None else f"agent {run.id}")
        a: Attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": str(run.id),
            "gen_ai.agent.name": name,
            "gen_ai.agent.description": run.goal,
            SPAN_KIND: "AGENT",
            "input.value": run.goal,
            "harness.run.id": run.id,
            "harness.run.depth": run.depth,
            "harness.run.goal": run.goal,
            "harness.run.file": run.file,
            "harness.run.status": run.status,
            "harness.run.steps": steps,
            "harness.run.tokens": tokens,
        }
        _set(a, "gen_ai.provider.name", run.provider)
        if run.session_id is not None:
            a["gen_ai.conversation.id"] = str(run.session_id)
            a["session.id"] = str(run.session_id)
        _set(a, "harness.run.parent_id", run.parent_run_id)
        _set(a, "harness.run.outcome", run.outcome)
        _set(a, "output.value", run.outcome)
        _set(a, "harness.run.success", run.success)
        _set(a, "harness.run.duration_ms", run.duration_ms)
        _set(a, "harness.run.turn_kind", run.turn_kind)
        _set(a, "harness.run.started_at", run.started_at)
        _set(a, "harness.run.finished_at", run.finished_at)
        _set(a, "harness.spawn.step", run.spawn_step)
        if self.options.prices is not None:
            a["harness.cost.micros"] = cost
            a["harness.cost.unpriced_calls"] = unpriced
            a["harness.cost.prices_as_of"] = self.options.prices.as_of
        if run.success is True:
            status = Status(StatusCode.OK)
        elif run.success is False or run.status == "failed":
            status = Status(StatusCode.ERROR, run.outcome or run.status)
        else:
            status = Status(StatusCode.UNSET)
        parent = None
        if run.parent_run_id is not None:
            parent = self._context(
                context.trace_id, self.run_span_id(context.trace_id, run.parent_run_id)
            )
        return self._span(
            f"invoke_agent {name}", context, parent, a, when.run_start, when.run_end,
            status=status, events=events,
        )  # fmt: skip

    def chat_span(
        self, call: SpanProviderCall, trace_id: int, parent: SpanContext, when: StepClock,
        content: tuple[SpanStep, tuple[tuple[str, str], ...]] | None,
    ) -> tuple[ReadableSpan, int | None]:  # fmt: skip
        """A provider call's `chat {model}` span, and its priced cost (None: unpriced);
        `content` is the call's step and its tool calls, whose prompt and calls it carries."""
        floor = when.run_start
        end = stamp_ns(call.at) or floor
        start = max(end - call.latency_ms * 1_000_000, floor)
        end = max(end, start + call.latency_ms * 1_000_000)
        a: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": call.provider,
            SPAN_KIND: "LLM",
            "llm.provider": call.provider,
            "harness.provider_call.id": call.id,
            "harness.provider_call.step": call.step,
            "harness.provider_call.attempt": call.attempt,
            "harness.provider_call.latency_ms": call.latency_ms,
        }
        _set(a, "gen_ai.request.model", call.model)
        _set(a, "llm.model_name", call.model)
        _set(a, "gen_ai.usage.input_tokens", call.prompt_tokens)
        _set(a, "gen_ai.usage.output_tokens", call.completion_tokens)
        _set(a, "gen_ai.usage.cache_read.input_tokens", call.cache_read_tokens)
        _set(a, "gen_ai.usage.cache_creation.input_tokens", call.cache_write_tokens)
        _set(a, "gen_ai.usage.reasoning.output_tokens", call.reasoning_tokens)
        _set(a, "llm.token_count.prompt", call.prompt_tokens)
        _set(a, "llm.token_count.completion", call.completion_tokens)
        _set(a, "llm.token_count.total", call.total_tokens)
        _set(a, "harness.provider_call.total_tokens", call.total_tokens)
        _set(a, "harness.provider_call.server_tool_requests", call.server_tool_requests)
        if call.ttft_ms is not None:
            a["gen_ai.response.time_to_first_chunk"] = call.ttft_ms / 1000
            a["harness.provider_call.ttft_ms"] = call.ttft_ms
        if call.finish_reason:
            a["gen_ai.response.finish_reasons"] = (call.finish_reason,)
        status = Status(StatusCode.UNSET)
        if call.failure:
            a["error.type"] = call.failure
            status = Status(StatusCode.ERROR, call.failure)
        priced = None
        prices = self.options.prices
        if prices is not None and call.model is not None:
            priced = prices.cost_micros(call.model, usage_of(call))
            if priced is not None:
                a["harness.cost.micros"] = priced
        if content is not None:
            step, calls = content
            chat_content(a, step, calls if call.failure is None else None, call.finish_reason)
        name = f"chat {call.model}" if call.model else "chat"
        context = self._context(trace_id, self.ids.span(trace_id, "provider_calls", call.id))
        span = self._span(name, context, parent, a, start, end, kind=SpanKind.CLIENT, status=status)
        return span, priced

    def _tool_attributes(self, name: str, call_id: str, tool_type: str) -> Attributes:
        return {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": tool_type,
            SPAN_KIND: "TOOL",
            "tool.name": name,
        }

    def tool_attempt_span(
        self, attempt: SpanToolAttempt, run_id: int, trace_id: int, parent: SpanContext,
        when: StepClock,
    ) -> ReadableSpan:  # fmt: skip
        """A tool attempt's `execute_tool {tool}` span, from its start to its completion."""
        a = self._tool_attributes(attempt.tool, f"tool_attempts:{attempt.id}", "function")
        a["harness.tool.source"] = "tool_attempts"
        a["harness.tool.step"] = attempt.step
        _set(a, "harness.tool.resolution", attempt.resolution)
        a["harness.tool.open"] = attempt.completed_at is None
        start = stamp_ns(attempt.started_at) or when.at(attempt.step)
        end = stamp_ns(attempt.completed_at) or start
        kept = when.step_row(attempt.step, attempt.tool)
        if kept is not None and self.options.include_content:
            self._content(a, kept[1], kept[0].result)
        key = (run_id, attempt.id, attempt.started_at)  # attempt ids may be reused
        context = self._context(trace_id, self.ids.span(trace_id, "tool_attempts", *key))
        return self._span(f"execute_tool {attempt.tool}", context, parent, a, start, end)

    def _content(self, a: Attributes, arguments: str, result: str) -> None:
        _set(a, "gen_ai.tool.call.arguments", arguments)
        _set(a, "gen_ai.tool.call.result", result)
        _set(a, "input.value", arguments)
        _set(a, "output.value", result)

    def step_tool_span(
        self, step: SpanStep, index: int, name: str, arguments: str, trace_id: int,
        parent: SpanContext, when: StepClock,
    ) -> ReadableSpan:  # fmt: skip
        """One of a step's own tool calls (`steps.tool_call`, the `index`-th of the step's
        calls) with no tool attempt recorded for it. The first call keeps the step's own id,
        so a step of one call has the id it always had."""
        key: tuple[int, ...] = (step.id,) if index == 0 else (step.id, index)
        call_id = "steps:" + ":".join(str(k) for k in key)
        a = self._tool_attributes(name, call_id, "function")
        a["harness.tool.source"] = "steps"
        a["harness.tool.step"] = step.step
        if self.options.include_content:
            self._content(a, arguments, step.result)
        at = when.at(step.step)
        context = self._context(trace_id, self.ids.span(trace_id, "steps", *key))
        return self._span(f"execute_tool {name}", context, parent, a, at, at)

    def server_tool_span(
        self, call: SpanServerToolCall, trace_id: int, parent: SpanContext, when: StepClock
    ) -> ReadableSpan:
        """A provider-side tool call (web search, code execution) at the moment it was recorded."""
        a = self._tool_attributes(call.tool, f"server_tool_calls:{call.id}", "extension")
        a["harness.tool.source"] = "server_tool_calls"
        a["harness.tool.step"] = call.step
        a["harness.tool.provider"] = call.provider
        status = Status(StatusCode.UNSET)
        if call.error:
            a["error.type"] = call.error
            status = Status(StatusCode.ERROR, call.error)
        at = stamp_ns(call.ran_at) or when.at(call.step)
        context = self._context(trace_id, self.ids.span(trace_id, "server_tool_calls", call.id))
        return self._span(f"execute_tool {call.tool}", context, parent, a, at, at, status=status)

    def mcp_span(
        self, event: SpanMcpEvent, trace_id: int, parent: SpanContext, when: StepClock
    ) -> ReadableSpan:
        """An MCP tool call, as long as the milliseconds it recorded, at its step's time."""
        tool = event.tool or event.kind
        a = self._tool_attributes(tool, f"mcp_events:{event.id}", "extension")
        a["harness.tool.source"] = "mcp_events"
        a["harness.tool.step"] = event.step
        a["harness.mcp.server"] = event.server
        a["harness.mcp.kind"] = event.kind
        _set(a, "harness.mcp.millis", event.millis)
        status = Status(StatusCode.UNSET)
        if event.ok is False:
            a["error.type"] = event.detail or "mcp_error"
            status = Status(StatusCode.ERROR, event.detail or "")
        elif event.detail and self.options.include_content:
            _set(a, "gen_ai.tool.call.result", event.detail)
        start = when.at(event.step)
        end = start + (event.millis or 0) * 1_000_000
        context = self._context(trace_id, self.ids.span(trace_id, "mcp_events", event.id))
        return self._span(f"execute_tool {tool}", context, parent, a, start, end, status=status)

    def step_event(self, step: SpanStep, calls: tuple[tuple[str, str], ...], at: int) -> Event:
        """A `harness.step` event: the step's number, decision, tokens and tools (several
        calls: their names joined by " | ", their arguments as a JSON array; a `tool_call`
        in no form of the grammar, which is no call: its text as written)."""
        a: Attributes = {
            "harness.step": step.step,
            "harness.step.id": step.id,
            "harness.step.decision": step.decision,
            "harness.step.tokens": step.tokens,
        }
        _set(a, "harness.step.tool", " | ".join(name for name, _ in calls))
        if self.options.include_content:
            _set(a, "harness.step.prompt", step.prompt)
            _set(a, "harness.step.result", step.result)
            if len(calls) == 1:
                _set(a, "harness.step.tool_arguments", calls[0][1])
            elif calls:
                a["harness.step.tool_arguments"] = "[" + ",".join(c[1] for c in calls) + "]"
            else:  # text the grammar reads as no call: as written
                _set(a, "harness.step.tool_call", step.tool_call)
        return Event("harness.step", a, at)

    def row_event(self, row: SpanEventRow, when: StepClock) -> Event:
        """A policy decision, approval, sandbox, checkpoint, agent or gate row as an event."""
        a: Attributes = {"harness.step": row.step, f"harness.{row.table}.id": row.id}
        prefix = EVENT_NAMES[row.table]
        for key, value in row.fields.items():
            a[f"{prefix}.{key}"] = value
        stamped = stamp_ns(str(row.fields["at"])) if "at" in row.fields else None
        return Event(prefix, a, stamped or when.at(row.step))
