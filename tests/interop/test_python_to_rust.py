"""Python → Rust: stores written through harness_store, read and resumed by io-harness 0.13's own
Store code (the oracle, whose API the Store follows), read by the newest release's (0.66's
`dump`), and upstream's answers on the values where the two once diverged."""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from harness_store import ContextEvent, McpEvent, StepRecord, Store
from harness_store.errors import InvalidValueError, ResumeError, RunNotFoundError

from . import pywriter
from .hsdump import differences, harness_dump, project, refusals
from .oracles import Oracles
from .releases import API_RELEASE, NEWER_WRITERS, OracleRelease, ids
from .test_newer_releases import reads_as_the_release_does

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def without_clock(value: Any) -> Any:
    """A dump with the values that come from the clock replaced by what they must look like:
    stamps in upstream's format, a duration that is a non-negative integer."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in ("created_at", "finished_at") and v is not None:
                assert STAMP.match(v), f"{k} {v!r} is not in upstream's stamp format"
                out[k] = "<stamp>"
            elif k == "duration_ms" and v is not None:
                assert isinstance(v, int) and v >= 0, f"duration_ms {v!r}"
                out[k] = "<ms>"
            else:
                out[k] = without_clock(v)
        return out
    if isinstance(value, list):
        return [without_clock(v) for v in value]
    return value


def agree(store_path: Path, oracles: Oracles) -> dict[str, Any]:
    """The oracle's dump equals what harness_store reads, read-write (which upgrades a store
    the oracle wrote to head) and then read-only; the dump. Read-only on a store not yet at
    head is test_rust_to_python's `READ_ONLY_0_13` divergence."""
    theirs = oracles.dump(API_RELEASE, store_path)
    # fields of releases after 0.13 (memory's `kind`, `pinned`) are not 0.13's to read
    with Store.open(store_path, backup=False) as store:
        assert differences(project(harness_dump(store), theirs), theirs) == []
    with Store.open(store_path, read_only=True) as store:
        ours = harness_dump(store)
    assert differences(project(ours, theirs), theirs) == []
    assert oracles.dump(API_RELEASE, store_path) == theirs
    return dict(theirs)


@pytest.fixture
def py_store(tmp_path: Path) -> Path:
    path = tmp_path / "py.sqlite3"
    with Store.open(path) as store:
        runs = pywriter.write(store)
    assert runs == {"root": 1, "child": 2, "crash": 3, "stuck": 4}
    return path


def test_upstream_reads_a_python_written_store_as_harness_store_does(
    py_store: Path, oracles: Oracles
) -> None:
    dump = agree(py_store, oracles)
    # the comparison covered what it should: hostile text, 2^53+1 tokens, every run state
    root = dump["runs"][0]
    assert "'; DROP TABLE runs; --" in root["canonical_trace"]
    assert root["steps"][-1]["tokens"] == 9_007_199_254_740_993
    assert [r["run_status"] for r in dump["runs"]] == ["Completed", "Paused", "Running", "Failed"]
    assert root["run_policy"] == pywriter.task_policy()
    assert len(dump["memory"]["/ws/many"]["list"]) == 64


def test_a_python_written_store_is_the_store_upstream_writes(
    py_store: Path, tmp_path: Path, oracles: Oracles
) -> None:
    """The same script through harness_store and through upstream's Store: the oracle dumps
    both identically but for the clock (stamps, durations)."""
    upstream = tmp_path / "upstream.sqlite3"
    transcript = oracles.json(API_RELEASE, "write", upstream)
    assert transcript["runs"] == {"root": 1, "child": 2, "crash": 3, "stuck": 4}
    ours = without_clock(oracles.dump(API_RELEASE, py_store))
    theirs = without_clock(oracles.dump(API_RELEASE, upstream))
    assert differences(ours, theirs) == []
    # and the stored policy text is byte for byte what upstream serialised
    with closing(sqlite3.connect(py_store)) as conn:
        stored = conn.execute("SELECT policy FROM run_policies ORDER BY run_id").fetchall()
    assert stored == [(transcript["policy_json"],), (transcript["permissive_json"],)]


def test_postgresql_reads_the_same_writes_as_upstream_reads_them(
    py_store: Path, pg_url: str, oracles: Oracles
) -> None:
    """The same script through a Store on PostgreSQL reads back, field for field, as the 0.13
    oracle reads the SQLite store it wrote (the clock aside)."""
    with Store.open(pg_url) as store:
        assert pywriter.write(store) == {"root": 1, "child": 2, "crash": 3, "stuck": 4}
        ours = without_clock(harness_dump(store))
    theirs = without_clock(oracles.dump(API_RELEASE, py_store))
    assert differences(project(ours, theirs), theirs) == []


def test_upstream_resumes_python_written_runs(py_store: Path, oracles: Oracles) -> None:
    transcript = oracles.json(API_RELEASE, "resume", py_store)
    # the crashed run is re-driven; the paused child is approved and continued
    assert transcript["resumed"] == [2, 3]
    assert transcript["decided"] == [[2, 1]]
    dump = agree(py_store, oracles)
    with Store.open(py_store, read_only=True) as store:
        assert store.run_status(3) is not None and store.outcome(3) == "success"
        assert [s.step for s in store.steps(3)] == [1, 2, 3, 4]
        assert [e.kind for e in store.checkpoint_events(3)][-5:] == [
            "resume", "skipped", "skipped", "checkpoint", "checkpoint"
        ]  # fmt: skip
    assert dump["runs"][2]["run_summary"]["steps"] == 4


# --- the values upstream takes and harness_store once did not --------------------------------


def test_u64_extremes_upstream_writes_read_back_the_same(tmp_path: Path, oracles: Oracles) -> None:
    """`edge` writes u64::MAX millis and tokens through upstream; both read them alike."""
    path = tmp_path / "edge.sqlite3"
    oracles.json(API_RELEASE, "edge", path)
    dump = agree(path, oracles)
    run = dump["runs"][0]
    assert max(e["millis"] or 0 for e in run["mcp_events"]) == 2**64 - 1
    assert {e["est_tokens"] for e in run["context_events"]} == {2**64 - 1}


def test_u64_extremes_written_in_python_read_back_upstream(
    tmp_path: Path, oracles: Oracles
) -> None:
    path = tmp_path / "u64.sqlite3"
    values = [2**63 - 1, 2**63, 2**64 - 1]
    with Store.open(path) as store:
        run = store.start_run("u64", "f")
        for step, value in enumerate(values, start=1):
            store.record_mcp(run, McpEvent.called("s", "t", True).at_step(step).with_millis(value))
            store.record_context_event(run, ContextEvent.assembled(step, "d", value))
            store.record_context_reported(run, step, value)
    (run_dump,) = agree(path, oracles)["runs"]
    assert [e["millis"] for e in run_dump["mcp_events"]] == values
    assert [e["reported_tokens"] for e in run_dump["context_events"]] == values


POLICY_DOCUMENTS = {
    "0.7 era, no net": '{"layers":[],"defaults":{"read":"allow","write":"ask","exec":"ask"}}',
    "missing defaults": '{"layers": []}',
    "missing layers": '{"defaults":{"read":"allow","write":"ask","exec":"ask","net":"allow"}}',
    "array": "[1, 2]",
    "number": "42",
    "NaN": '{"layers":[],"defaults":{"read":"allow","write":"ask","exec":"ask"},"x":NaN}',
    "unknown fields": '{"layers":[{"name":"a","rules":[],"x":1}],"defaults":'
    '{"read":"deny","write":"deny","exec":"deny","net":"ask","y":[]},"z":{}}',
    "unknown effect": '{"layers":[],"defaults":{"read":"maybe","write":"ask","exec":"ask"}}',
    "duplicate field": '{"layers":[],"layers":[],"defaults":{"read":"allow","write":"ask",'
    '"exec":"ask"}}',
    "struct as a sequence": '[[["l",[["read","deny","*.pem"]]]],["allow","ask","ask"]]',
    "unit variant as a map": '{"layers":[],"defaults":{"read":{"allow":null},"write":"ask",'
    '"exec":"ask"}}',
    "rule without pattern": '{"layers":[{"name":"a","rules":[{"act":"read","effect":"deny"}]}],'
    '"defaults":{"read":"allow","write":"ask","exec":"ask"}}',
    "name not text": '{"layers":[{"name":7,"rules":[]}],"defaults":{"read":"allow",'
    '"write":"ask","exec":"ask"}}',
    "not JSON": "{layers",
    "trailing text": '{"layers":[],"defaults":{"read":"allow","write":"ask","exec":"ask"}} x',
}


def test_stored_policies_read_as_upstreams_policy_reads_them(
    tmp_path: Path, oracles: Oracles
) -> None:
    """Each document stored as-is: upstream's `run_policy` and harness_store's agree on which
    are readable and on what they read as."""
    path = tmp_path / "policies.sqlite3"
    with Store.open(path) as store:
        runs = {name: store.start_run(name, "f") for name in POLICY_DOCUMENTS}
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executemany(
            "INSERT INTO run_policies (run_id, policy) VALUES (?, ?)",
            [(runs[n], doc) for n, doc in POLICY_DOCUMENTS.items()],
        )
    dump = oracles.dump(API_RELEASE, path)
    upstream = {r["id"]: r["run_policy"] for r in dump["runs"]}
    with Store.open(path, read_only=True) as store:
        for name, run in runs.items():
            theirs = upstream[run]
            if "error" in theirs:
                with pytest.raises(ResumeError, match="unreadable recorded policy"):
                    store.run_policy(run)
            else:
                assert store.run_policy(run) == theirs, name
    # what harness_store accepts to write is exactly what upstream can read
    with Store.open(path) as store:
        for name, run in runs.items():
            if "error" in upstream[run]:
                with pytest.raises(InvalidValueError):
                    store.record_run_policy(run, POLICY_DOCUMENTS[name])
            else:
                store.record_run_policy(run, POLICY_DOCUMENTS[name])
                assert store.run_policy(run) == upstream[run], name
    readable = {n for n, r in runs.items() if "error" not in (upstream[r] or {})}
    assert {"0.7 era, no net", "unknown fields", "struct as a sequence"} <= readable
    assert upstream[runs["0.7 era, no net"]]["defaults"]["net"] == "deny"


# --- foreign keys ---------------------------------------------------------------------------


def test_steps_for_a_missing_run_are_refused_as_upstream_refuses_them(
    tmp_path: Path, oracles: Oracles
) -> None:
    path = tmp_path / "fk.sqlite3"
    attempts = dict(map(tuple, oracles.json(API_RELEASE, "edge", path)["attempts"]))
    refused = attempts["checkpoint_step for a run that does not exist"]
    assert "FOREIGN KEY" in json.dumps(refused)
    with Store.open(path) as store:
        before = store.steps(999_999)
        with pytest.raises(RunNotFoundError):
            store.checkpoint_step(999_999, StepRecord.new(1, "orphan", "x"))
        with pytest.raises(RunNotFoundError):
            store.record(999_999, StepRecord.new(1, "orphan", "x"))
        assert store.steps(999_999) == before == []


@pytest.mark.parametrize("release", NEWER_WRITERS, ids=ids(NEWER_WRITERS))
def test_the_newest_release_reads_a_python_written_store_as_harness_store_does(
    release: OracleRelease, py_store: Path, oracles: Oracles
) -> None:
    """A store the Store wrote at head is opened by the newest release's own code (whose shape
    is the head's): no getter refuses anything, and every 0.13 field reads as harness_store
    reads it."""
    before = oracles.dump_text(release, py_store)
    assert refusals(json.loads(before)) == []
    assert reads_as_the_release_does(py_store, release, oracles) == 4
    assert oracles.dump_text(release, py_store) == before
