"""Hostile values on both backends: control characters, NUL, a megabyte of text and the
largest in-range numbers round-trip verbatim; NUL and out-of-range values raise
`InvalidValueError` and write nothing, inside a transaction too."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from support import upstream_sql as up
from support.policies import PERMISSIVE_POLICY
from support.upstream_sql import counts

import harness_store as hs
from harness_store import MEMORY_MAX_ENTRY_CHARS, StepRecord, Store
from harness_store.errors import InvalidValueError

READ = hs.ObsKind.READ

TRUNCATED = "…[truncated]"
U32_MAX = 2**32 - 1
I64_MAX = 2**63 - 1


def keys(entries: list[Any]) -> list[str]:
    return [e.key for e in entries]


CONTROL = (
    "".join(chr(c) for c in range(1, 32)) + "\x7f" + "".join(chr(c) for c in range(0x80, 0xA0))
)


HOSTILE: tuple[str, ...] = (
    "it's a 'single' quote",
    'say "double" quotes',
    "'; DROP TABLE runs; --",
    "Robert'); DROP TABLE steps;--",
    "%s %(name)s ? ?1 :name $1 {0} \\N \\x00",
    "100% _like_ wildcards \\ back\\slash",
    "crab 🦀 family 👩\u200d👩\u200d👧 flag 🇳🇴 math 𝕏",
    "RTL مرحبا بالعالم שלום \u202eoverride\u202c \u200f",
    "combining e\u0301 a\u0308 n\u0303 Z\u0351\u0352\u0353",
    "日本語 中文 한국어",
    CONTROL,
    "\u2028\u2029\ufeff\ufffd\uffff",
    "",
    "  spaces around  ",
    "tab\there\r\nCRLF\n",
)


MEGABYTE = ("0123456789abcdé🦀\n" * 62_500)[:1_000_000]


@pytest.mark.slow_on("postgresql")
def test_hostile_strings_round_trip_verbatim(db: Store, db_target: str) -> None:
    values = HOSTILE
    runs_before, before = len(db.runs()), counts(db_target)
    for s in values:
        run = db.start_run(s, s)
        db.set_provider(run, s)
        db.checkpoint_step(run, StepRecord(1, s, s, s, s, 1))
        db.record_event(run, hs.PolicyEvent(1, s, s, s, s, s, s, s, s))
        pending = db.put_pending(run, 1, s, s, s)
        db.resolve_pending(pending, s)
        db.record_agent_event(hs.AgentEvent(run, 1, s, None, s, None, None))
        db.record_sandbox_event(hs.SandboxEvent(run, 1, s, s, s))
        db.record_checkpoint_event(hs.CheckpointEvent(run, 1, s, s))
        db.record_mcp(run, hs.McpEvent(1, s, s, s, None, None, s))
        db.record_context_event(run, hs.ContextEvent(1, s, s))
        db.record_spawn(run, 1, run, s, s, s, None, s)
        db.record_observations(run, [hs.Observation(1, hs.ObsKind.MESSAGE, s, s)])
        db.record_run_policy(
            run, {"layers": [{"name": s, "rules": []}], "defaults": PERMISSIVE_POLICY["defaults"]}
        )
        db.memory_put(s, s, s, run, 1)
        db.finish_run(run, s)

        assert db.steps(run) == [StepRecord(1, s, s, s, s, 1)]
        assert db.provider(run) == s
        assert db.events(run) == [hs.PolicyEvent(1, s, s, s, s, s, s, s, s)]
        p = db.pending(pending)
        assert p is not None and (p.act, p.target, p.content, p.resolved) == (s, s, s, s)
        assert db.agent_events(run)[0].kind == s and db.agent_events(run)[0].detail == s
        assert db.sandbox_events(run) == [hs.SandboxEvent(run, 1, s, s, s)]
        assert db.checkpoint_events(run)[-1] == hs.CheckpointEvent(run, 1, s, s)
        assert db.mcp_events(run) == [hs.McpEvent(1, s, s, s, None, None, s)]
        assert db.context_events(run) == [hs.ContextEvent(1, s, s)]
        spawn = db.find_spawn(run, 1, s)
        assert spawn is not None and (spawn.goal, spawn.needle, spawn.deny_write) == (s, s, s)
        assert db.observations(run) == [hs.Observation(1, hs.ObsKind.MESSAGE, s, s)]
        assert db.run_policy(run) == {
            "layers": [{"name": s, "rules": []}],
            "defaults": PERMISSIVE_POLICY["defaults"],
        }
        entry = db.memory_get(s, s)
        assert entry is not None and (entry.key, entry.value) == (s, s)
        assert [e.key for e in db.memory_list(s)] == [s]
        assert db.outcome(run) == s
        assert db.canonical_trace(run).startswith(f"step 1 | tokens 1 | decision {s} |")

        # and upstream's SQL on a connection of our own reads the same characters back
        with up.connect(db_target) as conn:
            assert up.read(conn, "steps", run) == [(1, s, s, s, s, 1)]
            assert up.execute(
                conn, "SELECT goal, file, outcome FROM runs WHERE id = ?", (run,)
            ) == [(s, s, s)]
            assert up.read(conn, "memory_get", s, s)[0][:2] == (s, s)
            if not up.is_postgres(db_target):
                assert up.execute(
                    conn,
                    "SELECT typeof(goal), typeof(result) FROM runs, steps "
                    "WHERE runs.id = ? AND steps.run_id = runs.id",
                    (run,),
                ) == [("text", "text")]
    # nothing was dropped or run as SQL
    assert len(db.runs()) == runs_before + len(values)
    assert counts(db_target)["steps"] == before["steps"] + len(values)


def test_a_megabyte_of_text_round_trips_verbatim(db: Store, db_target: str, ws: str) -> None:
    mb = MEGABYTE
    assert len(mb) == 1_000_000
    run = db.start_run(mb, "f")
    db.checkpoint_step(run, StepRecord(1, "read big.txt", mb, mb, "", 1))
    db.record_observations(run, [hs.Observation(1, hs.ObsKind.READ, "big.txt", mb)])
    db.record_context_event(run, hs.ContextEvent.reread(1, mb))
    db.memory_put(ws, "big", mb, run, 1)
    assert db.steps(run) == [StepRecord(1, "read big.txt", mb, mb, "", 1)]
    assert list(db.iter_steps(run, page=1)) == db.steps(run)
    assert db.observations(run)[0].text == mb
    assert db.context_events(run)[0].detail == mb
    assert db.canonical_trace(run).endswith(f"result {mb}\ncontext 1 | reread | {mb}\n")
    entry = db.memory_get(ws, "big")
    assert entry is not None
    assert entry.value == mb[: MEMORY_MAX_ENTRY_CHARS - len(TRUNCATED)] + TRUNCATED
    with up.connect(db_target) as conn:
        assert up.read(conn, "steps", run) == [(1, "read big.txt", mb, mb, "", 1)]
        assert up.execute(conn, "SELECT goal FROM runs WHERE id = ?", (run,)) == [(mb,)]


def _nul_writes(db: Store, run: int, ws: str) -> list[tuple[str, Callable[[], Any]]]:
    n = "bad\x00value"
    return [
        ("start_run", lambda: db.start_run(n, "f")),
        ("start_child_run", lambda: db.start_child_run("g", n, run, 1)),
        ("set_provider", lambda: db.set_provider(run, n)),
        ("set_status", lambda: db.set_status(run, n)),
        ("checkpoint_step", lambda: db.checkpoint_step(run, StepRecord(5, "d", "r", "p", n))),
        ("record", lambda: db.record(run, StepRecord(5, "d", n))),
        ("checkpoint_steps", lambda: db.checkpoint_steps(
            run, [StepRecord(5, "ok", ""), StepRecord(6, n, "")])),
        ("record_event", lambda: db.record_event(run, hs.PolicyEvent.refusal(1, "read", n))),
        ("put_pending", lambda: db.put_pending(run, 1, "write", "t", n)),
        ("record_agent_event", lambda: db.record_agent_event(
            hs.AgentEvent.spawn_refused(run, 1, n))),
        ("record_sandbox_event", lambda: db.record_sandbox_event(
            hs.SandboxEvent.exec(run, 1, "b", n))),
        ("record_checkpoint_event", lambda: db.record_checkpoint_event(
            hs.CheckpointEvent.resume(run, 1, n))),
        ("record_mcp", lambda: db.record_mcp(run, hs.McpEvent.connected(n, "stdio"))),
        ("record_context_event", lambda: db.record_context_event(
            run, hs.ContextEvent.reread(1, n))),
        ("record_spawn", lambda: db.record_spawn(run, 1, run, "g", "v", n, None, "[]")),
        ("record_observations", lambda: db.record_observations(
            run, [hs.Observation(1, READ, "a", "ok"), hs.Observation(1, READ, "a", n)])),
        ("record_run_policy", lambda: db.record_run_policy(run, '{"a": "' + n + '"}')),
        ("memory_put key", lambda: db.memory_put(ws, n, "v", run, 1)),
        ("memory_put value", lambda: db.memory_put(ws, "k", n, run, 1)),
        ("memory_put workspace", lambda: db.memory_put(n, "k", "v", run, 1)),
        ("finish_run", lambda: db.finish_run(run, n)),
    ]  # fmt: skip


def _range_writes(db: Store, run: int, ws: str) -> list[tuple[str, Callable[[], Any]]]:
    return [
        ("negative step", lambda: db.checkpoint_step(run, StepRecord(-1, "d", "r"))),
        ("step 2**32", lambda: db.checkpoint_step(run, StepRecord(U32_MAX + 1, "d", "r"))),
        ("tokens 2**63", lambda: db.checkpoint_step(
            run, StepRecord(1, "d", "r", "", "", I64_MAX + 1))),
        ("tokens 2**64", lambda: db.record(run, StepRecord(1, "d", "r", "", "", 2**64))),
        ("negative tokens", lambda: db.record(run, StepRecord(1, "d", "r", "", "", -1))),
        ("batch with one bad step", lambda: db.checkpoint_steps(
            run, [StepRecord(1, "d", "r"), StepRecord(-5, "d", "r")])),
        ("pending step", lambda: db.put_pending(run, -1, "write", "t", None)),
        ("event step", lambda: db.record_event(run, hs.PolicyEvent.refusal(U32_MAX + 1, "r", "t"))),
        ("draw tokens", lambda: db.record_agent_event(
            hs.AgentEvent.budget_draw(run, 1, I64_MAX + 1, 0))),
        ("draw remaining", lambda: db.record_agent_event(
            hs.AgentEvent.budget_draw(run, 1, 0, -1))),
        ("mcp millis", lambda: db.record_mcp(
            run, hs.McpEvent.connected("s", "t").with_millis(2**64))),
        ("context est", lambda: db.record_context_event(
            run, hs.ContextEvent.assembled(1, "d", 2**64))),
        ("child depth", lambda: db.start_child_run("g", "f", run, U32_MAX + 1)),
        ("child depth negative", lambda: db.start_child_run("g", "f", run, -1)),
        ("spawn max_steps", lambda: db.record_spawn(run, 1, run, "g", "v", "n", U32_MAX + 1, "[]")),
        ("memory step", lambda: db.memory_put(ws, "k", "v", run, -1)),
        ("observation step", lambda: db.record_observations(
            run, [hs.Observation(1, hs.ObsKind.READ, "a", "ok"),
                  hs.Observation(-1, hs.ObsKind.READ, "a", "x")])),
        ("run id 2**63", lambda: db.checkpoint_step(I64_MAX + 1, StepRecord(1, "d", "r"))),
    ]  # fmt: skip


def test_nul_and_out_of_range_values_raise_and_write_nothing(
    db: Store, ws: str, db_target: str
) -> None:
    run = db.start_run("g", "f")
    db.checkpoint_step(run, StepRecord(1, "d", "r"))
    db.memory_put(ws, "k", "original", run, 1)
    before = counts(db_target)
    steps_before = up.read_at(db_target, "steps", run)
    failures = []
    for name, write in _nul_writes(db, run, ws) + _range_writes(db, run, ws):
        try:
            write()
        except InvalidValueError:
            pass
        except Exception as exc:
            failures.append(f"{name}: raised {type(exc).__name__}: {exc}")
        else:
            failures.append(f"{name}: accepted")
        after = counts(db_target)
        if after != before:
            changed = {t: (before[t], after[t]) for t in before if before[t] != after[t]}
            failures.append(f"{name}: wrote {changed}")
            before = after
    assert not failures, "\n".join(failures)
    assert up.read_at(db_target, "steps", run) == steps_before
    assert db.provider(run) is None and db.status(run) == "running"
    entry = db.memory_get(ws, "k")
    assert entry is not None and entry.value == "original"


def test_the_largest_in_range_values_round_trip(db: Store, db_target: str) -> None:
    run = db.start_run("g", "f")
    db.checkpoint_step(run, StepRecord(U32_MAX, "d", "r", "", "", I64_MAX))
    db.checkpoint_step(run, StepRecord(0, "d", "r", "", "", 0))
    assert db.last_step(run) == U32_MAX
    assert db.steps(run)[-1] == StepRecord(U32_MAX, "d", "r", "", "", I64_MAX)
    assert up.read_at(db_target, "steps", run)[-1] == (U32_MAX, "d", "r", "", "", I64_MAX)
    db.record_agent_event(hs.AgentEvent.budget_draw(run, U32_MAX, I64_MAX, I64_MAX))
    assert db.agent_events(run)[0].tokens == I64_MAX


def test_an_invalid_value_inside_a_transaction_rolls_the_block_back(
    db: Store, db_target: str
) -> None:
    before = counts(db_target)
    with pytest.raises(InvalidValueError), db.transaction():
        run = db.start_run("g", "f")
        db.checkpoint_step(run, StepRecord(1, "d", "r"))
        db.checkpoint_step(run, StepRecord(2, "d", "bad\x00"))
    assert counts(db_target) == before


def test_long_memory_keys_and_nul_inside_policy_json_round_trip(db: Store, ws: str) -> None:
    """upstream (SQLite) keeps a memory key of any length, and serde escapes a NUL inside a
    policy's strings as `\\u0000`, so both are storable values, not errors."""
    run = db.start_run("g", "f")
    rnd = random.Random(7)
    # 4,000 characters that do not compress (12,000 bytes): a key, not a value
    key = "".join(chr(rnd.randrange(0x4E00, 0x9FFF)) for _ in range(4000))
    if db.backend.name == "postgresql":
        # PostgreSQL's btree behind UNIQUE(workspace, key) cannot hold it: refused, typed,
        # and nothing written.
        with pytest.raises(InvalidValueError, match="unique index"):
            db.memory_put(ws, key, "v", run, 1)
        assert db.memory_list(ws) == []
    else:
        assert db.memory_put(ws, key, "v", run, 1) == []
        entry = db.memory_get(ws, key)
        assert entry is not None and entry.key == key
        assert keys(db.memory_list(ws)) == [key]
    policy = {
        "layers": [{"name": "a\x00b", "rules": []}],
        "defaults": PERMISSIVE_POLICY["defaults"],
    }
    db.record_run_policy(run, policy)
    assert db.run_policy(run) == policy
