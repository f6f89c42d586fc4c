"""The run-level API of io-harness 0.66 (runs, trace, stream, accounting, leases) against
upstream's own code, both ways.

Rust → Python: `oracle-0_66 write` runs upstream's script through upstream's Store; every new
getter read here through harness_store must equal what upstream's own getters return in the
oracle's `dump` (parsed from Rust's Debug rendering). Python → Rust: a store written through
the new harness_store methods is dumped by upstream, and upstream must read exactly what
harness_store reads. SQLite only: the oracle opens files.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from harness_store import (
    AssistantTurn,
    CheckpointEvent,
    Citation,
    ContextEvent,
    Edit,
    GateOutcome,
    LeaseConflictError,
    SandboxEvent,
    StepRecord,
    Store,
)
from harness_store.records.accounting import Price, PriceTable, ProviderCall, Usage
from harness_store.records.trace import RunEvent, ServerToolCall, Snapshot, ToolCall, ToolRecovery

from .debugform import debug
from .oracles import Oracles
from .rustdebug import parse

Oracle = Callable[[str, Path], Any]


@pytest.fixture
def oracle(oracles: Oracles) -> Oracle:
    """`oracle(command, path)`: io-harness 0.66's oracle CLI, its JSON output parsed."""
    binary = oracles.folder / "oracle-0_66"

    def run(command: str, path: Path) -> Any:
        done = subprocess.run(
            [str(binary), command, str(path)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        return json.loads(done.stdout)

    return run


PRICES = PriceTable.new("2026-01-01").with_("m-1", Price())
"""The oracle dump's fixed price table: one model, priced at zero."""

PER_RUN = (
    "run_root",
    "edits",
    "patch",
    "snapshot_paths",
    "rewinds",
    "open_attempts",
    "step_turns",
    "gate_attempts",
    "last_gate_attempt",
    "citations",
    "server_tool_calls",
    "provider_calls",
    "events_since",
    "tree_events_since",
    "run_lease",
    "steps",
    "checkpoint_events",
    "spent_tokens",
)
TOP = (
    "event_cursor",
    "spend_by_model",
    "spend_by_day",
    "runs_by_outcome",
    "runs_by_day",
    "first_try",
    "gate_failures_by_phase",
    "recovery",
)


def ours(store: Store, run: int, name: str) -> Any:
    """harness_store's answer for one per-run getter, as the dump calls it."""
    if name in ("events_since", "tree_events_since"):
        return debug(getattr(store, name)(run, 0, 1000))
    getter = getattr(store, name)
    return debug(getter(run))


def theirs(value: str) -> Any:
    return parse(value)


def per_run_differences(store: Store, dump: dict[str, Any]) -> list[str]:
    diffs = []
    for entry in dump["runs"]:
        run = entry["id"]
        for name in PER_RUN:
            mine, upstream = ours(store, run, name), theirs(entry[name])
            if mine != upstream:
                diffs.append(f"run {run} {name}: harness_store {mine!r:.400} != {upstream!r:.400}")
        snaps = [debug(store.snapshot(run, p)) for p in store.snapshot_paths(run)]
        if snaps != [theirs(s) for s in entry["snapshots"]]:
            diffs.append(f"run {run} snapshots: {snaps!r:.400} != {entry['snapshots']!r:.400}")
    for name in TOP:
        getter = getattr(store, name)
        mine = debug(getter(PRICES) if name.startswith("spend") else getter())
        if mine != theirs(dump[name]):
            diffs.append(f"{name}: harness_store {mine!r:.400} != {dump[name]!r:.400}")
    return diffs


def test_rust_written_rows_read_here_as_upstream_reads_them(tmp_path: Path, oracle: Oracle) -> None:
    path = tmp_path / "rust.sqlite3"
    oracle("write", path)
    dump = oracle("dump", path)
    copy = tmp_path / "copy.sqlite3"
    shutil.copy(path, copy)
    with Store.open(copy, backup=False) as store:
        assert per_run_differences(store, dump) == []
        # the script's lost lease: the stale driver wrote nothing, the new owner its step
        lost = [r for r in dump["runs"] if '"stale"' in r["steps"] or '"new owner"' in r["steps"]]
        assert [s.decision for s in store.steps(lost[0]["id"])] == ["new owner"]


def write_python(store: Store) -> dict[str, int]:
    """Every new write method, on rows upstream must read back as harness_store does."""
    root = store.start_run('root ü "q"', "a.txt")
    child = store.start_child_run("child", "b.txt", root, 1)
    grandchild = store.start_child_run("grandchild", "c.txt", child, 2)
    store.checkpoint_step(root, StepRecord.new(1, "write_file", "ok").with_trace("p", "{}", 7))
    edit = Edit.measure(1, "write_file", "a.txt", "one\ntwo\nthree\n", "one\n2\nthree\nfour")
    store.record_edit(root, edit.with_hunk("one\ntwo\nthree\n", "one\n2\nthree\nfour"))
    store.record_edit(root, Edit(2, "shell", "gone.txt", 0, 3))  # an edit with no hunk
    crlf = "a\r\nb\r\n"
    store.record_edit(
        child,
        Edit.measure(1, "edit_file", "w.txt", crlf, "a\r\nc\r\n").with_hunk(crlf, "a\r\nc\r\n"),
    )
    store.record_snapshot(root, Snapshot.text(1, "a.txt", "one\ntwo\nthree\n"))
    store.record_snapshot(root, Snapshot.absent(1, "a.txt"))  # only the first lands
    store.record_snapshot(root, Snapshot.absent(2, "new.txt"))
    store.record_snapshot(root, Snapshot.unkept(2, "big.bin", "binary"))
    store.record_rewind(root, ["a.txt", "new.txt"], ["lang"], ["tmp"], [(3, "queued ✓")], 1)
    store.record_rewind(child, [], [], [], [])
    usage = Usage(1000, 200, 1200, 500, 100, 50, 2)
    store.record_provider_call(
        root, ProviderCall(1, 1, "anthropic", "m-1", usage, 321, 40, "tool_use")
    )
    store.record_provider_call(root, ProviderCall(1, 2, "openai", None, Usage(5, 5, 10), 9))
    store.record_provider_call(
        child, ProviderCall(2, 1, "openai", "m-2", None, 0, failure="timeout")
    )
    store.record_step_turn(
        root,
        AssistantTurn.new(
            1,
            "I will ✓",
            [
                ToolCall("write_file", {"path": "a.txt", "body": "x\ny", "n": 3, "ok": True}),
                ToolCall("read_file", {"path": "é"}),
            ],
        ),
    )
    store.record_step_turn(child, AssistantTurn.new(1, None, []))
    store.record_citations(
        root,
        1,
        [
            Citation("https://a", "A", "quoted"),
            Citation("https://a", "again"),
            Citation("https://b"),
        ],
    )
    store.record_server_tool_calls(
        root,
        1,
        [
            ServerToolCall.ok("anthropic", "web_search"),
            ServerToolCall.failed("anthropic", "web_search", "max_uses_exceeded"),
        ],
    )
    a = store.open_attempt(root, 2, "charge", ToolRecovery.INDETERMINATE)
    b = store.open_attempt(root, 2, "deploy", ToolRecovery.INDETERMINATE)
    assert store.open_attempt(root, 2, "read", ToolRecovery.REPLAYABLE) is None
    assert a is not None and b is not None
    store.resolve_attempt(a, "skip")
    store.close_attempt(b)
    store.open_attempt(root, 3, "notify", ToolRecovery.INDETERMINATE)
    store.put_event(RunEvent.new(root, 1, "started", goal="g ü", provider="p"))
    store.put_event(
        RunEvent.at_depth(child, 1, 1, "step", decision="d", tool_call="c", tokens=5, changed=True)
    )
    store.put_event(RunEvent.new(root, 2, "stalled"))
    store.put_gate_attempt(root, 2, "test", GateOutcome.FAILED, "1 failed")
    store.put_gate_attempt(root, 3, "review", GateOutcome.ERRORED, "HTTP 529")
    store.put_gate_attempt(root, 4, "review", GateOutcome.PASSED, "")
    store.record_sandbox_event(SandboxEvent.gate_phase_failed(root, 2, "test-run"))
    store.record_sandbox_event(SandboxEvent.gate_phase_failed(child, 2, "test-run"))
    store.record_context_event(root, ContextEvent.served(1, "openai"))
    store.record_context_event(root, ContextEvent.replan(3, "no progress"))
    store.record_checkpoint_event(CheckpointEvent.resume(root, 4, "after a crash"))
    # a leased driver: its staged turn lands with its step; the lease is still held at dump
    leased = store.start_run("leased", "l.md")
    store.acquire_lease(leased, 3600)
    store.stage_step_turn(leased, AssistantTurn.new(1, "staged", [ToolCall("read_file", {})]))
    store.checkpoint_step(leased, StepRecord.new(1, "read_file", "ok"))
    store.finish_run(child, "success")
    store.finish_run(grandchild, "stalled")
    store.finish_run(root, "success")
    return {"root": root, "child": child, "grandchild": grandchild, "leased": leased}


def test_python_written_rows_read_in_upstream_as_here(tmp_path: Path, oracle: Oracle) -> None:
    path = tmp_path / "python.sqlite3"
    with Store.open(path) as store:
        ids = write_python(store)
    dump = oracle("dump", path)
    with Store.open(path, read_only=True) as store:
        assert per_run_differences(store, dump) == []
        leased = next(r for r in dump["runs"] if r["id"] == ids["leased"])
        assert parse(leased["run_lease"])["generation"] == 1
        assert "staged" in leased["step_turns"]
    assert parse(dump["recovery"]) == {
        "_type": "Recovery",
        "fallbacks": 1,
        "replans": 1,
        "resumes": 1,
    }


HOLD = """
import sys, time
from harness_store import Store
with Store.open(sys.argv[1]) as st:
    st.acquire_lease(int(sys.argv[2]), 3600)
    print(st.owner(), flush=True)
"""


def test_upstream_and_harness_store_agree_on_who_holds_a_run(
    tmp_path: Path, oracle: Oracle
) -> None:
    """The oracle's script leases run 6 ("leased run"). Held by this live Python process, upstream
    refuses it naming Python's expiry; held by a Python process that has exited, upstream takes
    it over at once (the owner id's pid is read the same way on both sides) and its script
    runs to the end."""
    live = tmp_path / "live.sqlite3"
    with Store.open(live) as store:
        store.acquire_lease(6, 3600)
        row = store.run_lease(6)
        assert row is not None
        with pytest.raises(subprocess.CalledProcessError) as refused:
            oracle("write", live)
        assert f"run 6 is held by another owner until {row.expires_at}" in (
            refused.value.stdout + refused.value.stderr
        )
        assert store.run_lease(6) == row  # upstream changed nothing of it

    dead = tmp_path / "dead.sqlite3"
    Store.open(dead).close()
    held = subprocess.run(
        [sys.executable, "-c", HOLD, str(dead), "6"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    oracle("write", dead)  # takes the dead owner's run over and completes
    dump = oracle("dump", dead)
    leased = next(r for r in dump["runs"] if r["id"] == 6)
    assert parse(leased["steps"])[0]["decision"] == "read_file"
    with Store.open(dead, read_only=True) as store:
        assert store.run_lease(6) is None  # upstream released it at the end of its script
        assert held.stdout.strip() != store.owner()


def test_a_python_contender_meets_a_live_rust_lease_holder(
    tmp_path: Path, oracles: Oracles
) -> None:
    """Rust holds, Python contends, both alive. The oracle's script leases its "lost lease" run
    for 1 s, sleeps 1.1 s and takes it over with a second handle. Python, in another process,
    tries to acquire that run all along: refused while the Rust lease is unlapsed (the holder
    is alive), then exactly one of the two take-overs wins — if Python's lands first, upstream's
    is refused and its script stops; if upstream's does, Python is refused until upstream
    releases, so any lease Python gets is a later generation."""
    # The script's 1 s lease is a window on the clock: on a loaded machine Python may first
    # look after it lapsed, and then the round proves nothing. So rounds are played until one
    # where Python met the live holder's unlapsed lease (a few at the most), and that round is
    # checked.
    for attempt in range(5):
        round_ = contend(tmp_path / f"contended-{attempt}.sqlite3", oracles)
        if round_.met_the_holder:
            break
    assert round_.met_the_holder, "Python never met the Rust holder's unlapsed lease"
    won, out, err, final = round_.won, round_.out, round_.err, round_.final
    if round_.rust.returncode == 0:  # upstream's take-over won (generation 2), then released
        assert won is None or won > 2, (won, out)
        assert '"checkpoint_step after losing the lease"' in out
    else:  # Python's take-over won: upstream's second handle was refused, and stopped there
        assert won == 2, (won, round_.rust.returncode, err)
        assert f"run {round_.lost} is held by another owner" in out + err, err
        assert final is not None and final.generation == 2 and final.owner == round_.owner


@dataclasses.dataclass
class Round:
    """One round of `contend`: the contended run, what Python won, the lease at the end, the
    oracle's process and output, and whether Python met the holder's unlapsed lease."""

    lost: int | None
    won: int | None
    final: Any
    rust: subprocess.Popen[str]
    out: str
    err: str
    owner: str
    met_the_holder: bool


def contend(path: Path, oracles: Oracles) -> Round:
    """The oracle's script writes `path` while Python, in this process, tries to acquire its
    "lost lease" run all along."""
    Store.open(path).close()
    rust = subprocess.Popen(
        [str(oracles.folder / "oracle-0_66"), "write", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    refusals: list[LeaseConflictError] = []
    won: int | None = None
    seen_generation: int | None = None
    with Store.open(path) as store:
        lost = None
        while rust.poll() is None and won is None:
            if lost is None:  # the script starts the run, then leases it
                with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as raw:
                    found = raw.execute("SELECT id FROM runs WHERE goal = 'lost lease'").fetchone()
                lost = None if found is None else int(found[0])
                continue
            row = store.run_lease(lost)
            if row is None:
                continue
            seen_generation = seen_generation or row.generation
            try:
                won = store.acquire_lease(lost, 60).generation
            except LeaseConflictError as refused:
                refusals.append(refused)
        out, err = rust.communicate(timeout=120)
        final = store.run_lease(lost) if lost is not None else None
    met = (
        lost is not None
        and seen_generation == 1
        and any(r.owner != store.owner() for r in refusals)
    )
    return Round(lost, won, final, rust, out, err, store.owner(), met)
