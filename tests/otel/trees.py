"""A store holding what an exporter maps: a tree of runs (a root, two spawned children, a
grandchild) in a session, with provider calls, tool attempts, server tool calls, MCP calls,
policy decisions, an approval, sandbox and checkpoint events, written through the Store."""

from __future__ import annotations

from typing import Any

from harness_store import Store
from harness_store.records import (
    McpEvent,
    PolicyEvent,
    ProviderCall,
    SandboxEvent,
    ServerToolCall,
    StepRecord,
    Usage,
)
from harness_store.store.trace_export import TraceExport


def call(step: int, model: str, prompt: int, completion: int, **extra: object) -> ProviderCall:
    """A provider call with usage."""
    usage = Usage(prompt_tokens=prompt, completion_tokens=completion,
                  total_tokens=prompt + completion, cache_read_tokens=prompt // 4,
                  cache_write_tokens=prompt // 8, reasoning_tokens=completion // 2)  # fmt: skip
    return ProviderCall(step=step, attempt=1, provider="anthropic", model=model, usage=usage,
                        latency_ms=300 + step, finish_reason="tool_use", **extra)  # type: ignore[arg-type]  # fmt: skip


def write_run(store: Store, run_id: int, steps: int, model: str, *, tools: bool = True) -> None:
    """`steps` steps of `run_id`, each with a provider call and a tool call."""
    for n in range(1, steps + 1):
        store.checkpoint_step(
            run_id,
            StepRecord.new(n, f"read file {n}", f"contents {n}").with_trace(
                f"prompt {n}", f'read_file:{{"path":"f{n}.txt"}}' if tools else "", 10 * n
            ),
        )
        store.record_provider_call(run_id, call(n, model, 100 * n, 10 * n))


def build_tree(store: Store) -> dict[str, int]:
    """The tree: root → (child a → grandchild), child b; returns the run ids by role."""
    session = store.create_session("/repo")
    root = store.start_run("fix the failing test", "/repo")
    store.record_turn(session, None, root, "fix the failing test")
    store.set_provider(root, "anthropic")
    write_run(store, root, 3, "claude-sonnet-4-5")
    attempt = store.open_attempt(root, 2, "read_file", "indeterminate")
    assert attempt is not None
    store.close_attempt(attempt)
    store.record_server_tool_calls(root, 3, [ServerToolCall("anthropic", "web_search")])
    store.record_mcp(root, McpEvent(3, "call", "github", "search_issues", True, 42, None))
    store.record_event(root, PolicyEvent(2, "decision", "write", "secrets/key.txt", "deny-secrets",
                                         "policy", "deny", "rule", None))  # fmt: skip
    store.put_pending(root, 3, "shell", "rm -rf build", None)
    store.record_sandbox_event(SandboxEvent(root, 1, "started", "bwrap", None))
    a = store.start_child_run("write the regression test", "/repo", root, 1)
    store.record_spawn(root, 2, a, "write the regression test", "t.rs", "ok", None, "[]", "tester")
    write_run(store, a, 2, "claude-haiku-4-5")
    g = store.start_child_run("check the fixture", "/repo", a, 2)
    store.record_spawn(a, 1, g, "check the fixture", "f.rs", "ok", None, "[]")
    write_run(store, g, 1, "claude-haiku-4-5", tools=False)
    store.finish_run(g, "success")
    store.finish_run(a, "success")
    b = store.start_child_run("update the docs", "/repo", root, 1)
    store.record_spawn(root, 3, b, "update the docs", "d.md", "ok", None, "[]")
    write_run(store, b, 2, "gpt-5")
    store.record_provider_call(b, ProviderCall(step=2, attempt=2, provider="openai", model="gpt-5",
                                               latency_ms=50, failure="rate_limited"))  # fmt: skip
    store.finish_run(b, "stalled")
    store.finish_run(root, "success")
    return {"root": root, "a": a, "g": g, "b": b}


def calls_and_chat_spans(
    store: Store, run_id: int, chats: dict[int, list[dict[str, Any]]]
) -> list[tuple[ProviderCall, dict[str, Any]]]:
    """Each provider call of `run_id` beside the chat span a receiver holds for it (matched by
    `harness.provider_call.id`), after checking there is exactly one span per call."""
    calls = store.provider_calls(run_id)
    got = sorted(chats.get(run_id, []), key=lambda s: s["attributes"]["harness.provider_call.id"])
    assert len(got) == len(calls)
    return list(zip(calls, got, strict=True))


def expected_tool_calls(store: Store, run_id: int) -> int:
    """Tool calls the store records for a run: its tool attempts, server tool calls and MCP
    calls, and each of a step's own tool calls that no tool attempt of the same step and tool
    holds."""
    attempts = {(a.step, a.tool) for a in TraceExport(store).tool_attempts(run_id)}
    steps = 0
    for step in store.steps(run_id):
        for call in step.tool_calls:
            if (step.step, call.name) not in attempts:
                steps += 1
    mcp = [e for e in store.mcp_events(run_id) if e.kind == "call" or e.tool]
    return (
        len(TraceExport(store).tool_attempts(run_id))
        + len(store.server_tool_calls(run_id))
        + len(mcp)
        + steps
    )
