"""A store written through `harness_store.Store` by the same script the 0.13 oracle's `write`
runs through upstream's Store (glue/oracle.rs): every method and record kind, hostile text,
retry rows, 2⁵³+1 tokens, memory caps and evictions, finished/paused/failed/crashed runs,
policies and the observation ledger. The same script through both stores must leave stores
the oracle dumps identically (time stamps aside).

Run as a script (`python pywriter.py PATH`) it writes PATH and prints the run ids: the
concurrency test starts several at once beside oracle writers.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from harness_store import (
    AgentEvent,
    CheckpointEvent,
    ContextEvent,
    McpEvent,
    Observation,
    ObsKind,
    PolicyEvent,
    SandboxEvent,
    StepRecord,
    Store,
)

ROOT_GOAL = "add a \"hello\" function — ünïcode ✓ 'quoted'"
CHILD_GOAL = "child: write tests 🧪 for hello()"

Step = tuple[int, str, str, str, str, int, bool]

ROOT_STEPS: list[Step] = [
    (1, "wrote file", "ok", "prompt with 'single' and \"double\" quotes\nand a newline",
     '{"tool":"write","args":{"path":"src/hello.rs","content":"fn hello() {}\\n"}}', 128, True),
    (2, "retry 1 after error", "error: provider timeout", "", "", 0, False),
    (2, "verified", "", "日本語のプロンプト 🚀", "", 42, True),
    (3, "", "emoji 🎉 result\twith a tab, a back\\slash and a NUL-free \x7f DEL",
     "'; DROP TABLE runs; --", "{}", 9_007_199_254_740_993, True),
    (1, "late retry of step 1", "stale", "", "", 1, False),
]  # fmt: skip
CHILD_STEPS: list[Step] = [(1, "spawned", "ok", "child prompt", "", 30, True)]
CRASH_STEPS: list[Step] = [
    (1, "read file", "fn main() {}", "crash prompt 1", '{"tool":"read"}', 7, True),
    (2, "wrote file", "partial", "crash prompt 2", '{"tool":"write"}', 8, True),
]
STUCK_STEPS: list[Step] = [(1, "no tool call", "I am thinking…", "stuck prompt", "", 5, True)]


def _rule(act: str, effect: str, pattern: str) -> dict[str, str]:
    return {"act": act, "effect": effect, "pattern": pattern}


def task_policy() -> dict[str, Any]:
    """upstream's `Policy::default()` plus a task layer, as the oracle's `task_policy()`."""
    secrets = [
        _rule(act, "deny", p)
        for p in (".env", "*.pem", "id_rsa", "id_ed25519", "*.key")
        for act in ("read", "write")
    ]
    return {
        "layers": [
            {"name": "builtin-secrets", "rules": secrets},
            {"name": "builtin-exec", "rules": [_rule("exec", "allow", "rustc"),
                                               _rule("exec", "allow", "<test-binary>")]},
            {"name": 'tâsk "q"', "rules": [_rule("write", "deny", "vendor/**"),
                                          _rule("net", "allow", "api.example.com:443")]},
        ],
        "defaults": {"read": "allow", "write": "ask", "exec": "ask", "net": "deny"},
    }  # fmt: skip


PERMISSIVE = {"layers": [], "defaults": dict.fromkeys(("read", "write", "exec", "net"), "allow")}


def put_step(st: Store, run: int, s: Step) -> None:
    step, decision, result, prompt, tool_call, tokens, checkpointed = s
    record = StepRecord.new(step, decision, result).with_trace(prompt, tool_call, tokens)
    if checkpointed:
        st.checkpoint_step(run, record)
    else:
        st.record(run, record)


def tick() -> None:
    """Past SQLite's millisecond stamps, as the oracle's `tick` (memory `created_at` order)."""
    time.sleep(0.003)


def write(st: Store) -> dict[str, int]:
    """The oracle's 0.13 `write` script, through harness_store; the run ids."""
    root = st.start_run(ROOT_GOAL, "src/hello.rs")
    st.set_provider(root, "anthropic")
    st.record_run_policy(root, task_policy())
    child = st.start_child_run(CHILD_GOAL, "tests/hello.rs", root, 1)
    st.set_provider(child, "openrouter")
    st.record_run_policy(child, PERMISSIVE)

    st.record_agent_event(AgentEvent.spawn(root, 1, child, CHILD_GOAL))
    st.record_agent_event(AgentEvent.spawn_refused(root, 2, "agents"))
    st.record_agent_event(AgentEvent.budget_draw(child, 1, 30, 970))
    st.record_spawn(root, 1, child, CHILD_GOAL, "tests/hello.rs", "fn test_", 5,
                    '["vendor/**","secrets/*"]')  # fmt: skip
    st.record_spawn(root, 1, child, CHILD_GOAL, "other.rs", "dup", None, "[]")
    st.record_spawn(root, 2, child, "", "", "", None, "[]")

    for s in ROOT_STEPS:
        put_step(st, root, s)
    st.record_checkpoint_event(
        CheckpointEvent.resume(root, 2, "resuming at step 2, 1 committed step(s) skipped")
    )
    st.record_checkpoint_event(CheckpointEvent.skipped(root, 1))
    st.record_checkpoint_event(CheckpointEvent.checkpoint(root, 3))

    refusal = PolicyEvent.refusal(2, "write", "secrets/key.txt")
    st.record_event(root, refusal.with_rule("secrets/*", "base"))
    st.record_event(root, PolicyEvent.decision(1, "write", "src/a.rs", "approve", "stdin")
                    .with_performed("src/sandbox/a.rs"))  # fmt: skip
    st.record_event(root, PolicyEvent.decision(2, "write", "src/b.rs", "approve", "remembered"))
    st.record_event(root, PolicyEvent.refusal(3, "net", "evil.example.com:443"))
    st.record_event(child, PolicyEvent.decision(1, "write", "tests/hello.rs", "defer", "stdin"))
    st.put_pending(child, 1, "write", "tests/hello.rs", "fn test_hello() { assert!(true); }\n— ünï")
    req2 = st.put_pending(root, 3, "exec", "cargo test -- --nocapture", None)
    req3 = st.put_pending(root, 3, "write", "empty.txt", "")
    st.resolve_pending(req2, "deny")
    st.resolve_pending(req3, "approve")

    st.record_sandbox_event(SandboxEvent.create(root, 1, "linux-namespaces"))
    argv = "rustc --edition 2021 /tmp/x/main.rs -o 'a b'"
    st.record_sandbox_event(SandboxEvent.exec(root, 2, "linux-namespaces", argv))
    st.record_sandbox_event(SandboxEvent.cap_hit(root, 2, "cpu"))
    st.record_sandbox_event(SandboxEvent.gate_phase_failed(root, 2, "criterion-compile"))
    st.record_sandbox_event(SandboxEvent.destroy(root, 3))

    st.record_mcp(root, McpEvent.connected("files", "stdio"))
    st.record_mcp(root, McpEvent.discovered("files", "files__read"))
    st.record_mcp(root, McpEvent.called("files", "files__read", True).at_step(2).with_millis(17))
    st.record_mcp(root, McpEvent.called("files", "files__write", False).at_step(3).with_millis(0)
                  .with_detail("truncated"))  # fmt: skip
    st.record_mcp(root, McpEvent.connected("remote", "").with_millis(250))
    st.record_mcp(root, McpEvent.disconnected("files").at_step(3))
    st.record_mcp(child, McpEvent.disconnected("remote"))

    st.record_context_event(root, ContextEvent.assembled(1, "carried=3 stubbed=5 reread=1", 1234))
    st.record_context_reported(root, 1, 1300)
    st.record_context_event(root, ContextEvent.assembled(2, "carried=1 stubbed=0 reread=0", 55))
    st.record_context_event(root, ContextEvent.reread(2, "src/a.rs: written at step 1"))
    st.record_context_event(root, ContextEvent.reread_refused(2, "secrets/k: refused by policy"))
    st.record_context_event(root, ContextEvent.memory_write(2, "key=build-cmd"))
    st.record_context_event(root, ContextEvent.memory_evict(3, "evicted k00"))
    st.record_context_event(root, ContextEvent.memory_recall(1, '2 notes | "quoted"'))
    st.record_context_event(root, ContextEvent.memory_write(3, ""))
    st.record_context_event(root, ContextEvent(3, "assembled", None, None, 5))
    st.record_context_reported(root, 3, 99)
    st.record_context_event(root, ContextEvent.served(2, "openrouter"))
    st.record_context_event(child, ContextEvent.stalled(1, "no progress twice"))
    st.record_context_event(root, ContextEvent.replan(3, "no progress; change approach"))

    def put(ws: str, key: str, value: str, run: int, step: int) -> None:
        tick()
        st.memory_put(ws, key, value, run, step)

    put("/ws/one", "build-cmd", "cargo test --all", root, 1)
    put("/ws/one", "huge", "é" * 5000, root, 2)
    put("/ws/one", "quote'\"key", "value with 'quotes' and \"doubles\" and ünïcode", child, 1)
    put("/ws/one", "build-cmd", "cargo nextest run", root, 3)
    put("/ws/two", "empty", "", child, 1)
    put("/ws/two", "exactly-2000", "z" * 2000, child, 1)
    put("/ws/two", "2001", "w" * 2001, child, 1)
    put("/ws/two", "emoji", "🧪" * 3000, child, 1)
    for i in range(66):
        put("/ws/many", f"k{i:02}", f"v{i}", root, 1)
        if i == 10:
            put("/ws/many", "k00", "v0 again", child, 2)
    for i in range(9):
        put("/ws/big", f"b{i}", "x" * 2000, root, 1)
    put("/ws/big", "b-huge", "y" * 2100, root, 2)
    put("/ws/tmp", "a", "1", root, 1)
    put("/ws/tmp", "b", "2", root, 1)
    st.memory_delete("/ws/one", "no such key")
    st.memory_delete("/ws/two", "2001")
    st.memory_clear("/ws/tmp")

    K = ObsKind
    st.record_observations(root, [
        Observation(1, K.READ, "src/hello.rs", "fn hello() {}\n"),
        Observation(1, K.WRITE, "src/hello.rs", "wrote 14 bytes"),
        Observation(2, K.GREP, 'fn "hello"', ""),
        Observation(2, K.FIND, "**/*.rs", "src/hello.rs\n"),
        Observation(2, K.SKILL, "rust", "skill body"),
        Observation(2, K.TOOL, "custom__lint", "clean"),
        Observation(3, K.MCP, "files__read", '{"ok":true}'),
        Observation(3, K.CHILD, "2", '[child 2 "goal" -> ok]'),
        Observation(3, K.MESSAGE, None, "done ✓ — ünïcode"),
        Observation(3, K.ERROR, None, "refused by policy: write secrets/k"),
    ])  # fmt: skip
    st.record_observations(root, [])
    st.record_observations(child, [Observation(1, K.MESSAGE, "", "child says hi")])

    for s in CHILD_STEPS:
        put_step(st, child, s)
    crash = st.start_run("crashy run", "src/crash.rs")
    st.set_provider(crash, "openai")
    for s in CRASH_STEPS:
        put_step(st, crash, s)
    stuck = st.start_run("stuck run", "")
    for s in STUCK_STEPS:
        put_step(st, stuck, s)
    st.finish_run(stuck, "step_cap_reached")
    st.set_status(stuck, "failed")
    st.finish_run(root, "success")
    st.finish_run(child, "awaiting_approval")
    return {"root": root, "child": child, "crash": crash, "stuck": stuck}


if __name__ == "__main__":
    with Store.open(sys.argv[1], backup=False) as store:
        print(write(store), flush=True)
