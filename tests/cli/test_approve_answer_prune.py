"""`harness-store approve/answer` and `size/prune/compact` on both backends: what they change,
their refusals and exit codes (run in this process), and confirmation without a terminal (a
real subprocess with nothing on its stdin)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURE_STORES, copy_fixture
from support.clirun import run_cli, run_in_process

from harness_store import Plan, PlanStep, Question, Store


def out_json(*args: object) -> Any:
    done = run_in_process(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow_on("postgresql")
def test_a_person_approves_and_answers_from_the_shell(store_target: str) -> None:
    with Store.open(store_target) as store:
        run = store.start_run("g", "f")
        first = store.put_pending(run, 1, "exec", "cargo test")
        second = store.put_pending(run, 1, "write", "x.txt")
        q = store.put_question(run, 2, Question("Which db?", None, ["sqlite", "pg"]))
        plan = store.put_plan(run, 3, Plan([PlanStep("port")]))
    assert run_in_process("answer", store_target, run, "mysql").returncode == 2  # not a choice
    assert out_json("answer", store_target, run, "pg", "--by", "alice")["answered"] is True
    assert (
        run_in_process("answer", store_target, run, "pg").returncode == 5
    )  # nothing open any more
    assert out_json("approve", store_target, run, "--id", first, "--deny")["decided"] == [
        {"request": first, "decision": "deny", "decided": True}
    ]
    done = run_in_process("approve", store_target, run)
    assert done.returncode == 0 and f"request {second} of run {run}: approve" in done.stdout
    assert run_in_process("approve", store_target, run).returncode == 5
    assert run_in_process("approve", store_target, run, "--revise", "x").returncode == 2
    revised = out_json("approve", store_target, run, "--plan", "--revise", "smaller")
    assert revised["decided"] == [{"plan": plan, "decision": "revise", "decided": True}]
    assert run_in_process("approve", store_target, 999, "--plan").returncode == 5
    with Store.open(store_target) as store:
        assert [p.resolved for p in store.pending_for_run(run)] == ["deny", "approve"]
        answered = store.question(q)
        assert answered is not None and (answered.answer, answered.answered_by) == ("pg", "alice")
        decided = store.plan(plan)
        assert decided is not None and decided.verdict is not None
        assert decided.verdict.correction == "smaller"


@pytest.mark.slow_on("postgresql")
def test_prune_asks_deletes_old_sessions_and_keeps_resumable_ones(store_target: str) -> None:
    with Store.open(store_target) as store:
        sessions = []
        for i in range(3):
            session = store.create_session(f"/ws/{i}")
            run = store.start_run("turn", "")
            store.record_turn(session, None, run, "prompt " * 50)
            if i != 1:
                store.finish_run(run, "passed")
            sessions.append(session)
    dry = out_json("prune", store_target, "--before", "9999-01-01", "--dry-run")
    assert (dry["sessions"], dry["refused"], dry["dry_run"]) == (2, [sessions[1]], True)
    refused = run_cli("prune", store_target, "--before", "9999-01-01")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert (
        run_in_process("prune", store_target, "--before", "last tuesday", "--yes").returncode == 2
    )
    size = out_json("size", store_target)
    assert (size["sessions"], size["runs"]) == (3, 3)
    done = out_json("prune", store_target, "--before", "9999-01-01", "--yes")
    assert (done["sessions"], done["runs"], done["refused"]) == (2, 2, [sessions[1]])
    with Store.open(store_target) as store:
        assert [store.session_root(s) for s in sessions] == [None, "/ws/1", None]
        run = store.session_turns(sessions[1])[0].run_id
        store.finish_run(run, "passed")
    archived = out_json("prune", store_target, "--before", "9999-01-01", "--archive", "--yes")
    assert (archived["sessions"], archived["action"]) == (1, "archive")
    with Store.open(store_target) as store:
        assert store.session_turns(sessions[1])[0].prompt == ""
    assert run_cli("compact", store_target).returncode == 2  # asks; no terminal, no --yes
    compacted = out_json("compact", store_target, "--yes")
    assert compacted["reclaimed_bytes"] >= 0 and compacted["file_bytes"] > 0


@pytest.mark.parametrize("name", FIXTURE_STORES)
def test_a_run_prune_dry_run_on_an_older_release_names_the_upgrade(
    tmp_path: Path, name: str
) -> None:
    """A store of 0.22 or 0.29, read without its upgrade, lacks tables a prune counts: the dry
    run says to upgrade (exit 3, one line), never a driver error, and changes no byte."""
    store = copy_fixture(name, tmp_path)
    digest = store.read_bytes()
    done = run_in_process("prune", store, "--runs", "--before", "9999-01-01", "--dry-run")
    assert done.returncode == 3, done
    assert "harness-store upgrade" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Error" not in done.stderr
    assert store.read_bytes() == digest


@pytest.mark.slow_on("postgresql")
def test_a_prune_that_copied_nothing_does_not_say_it_copied(
    store_target: str, tmp_path: Path
) -> None:
    with Store.open(store_target) as store:
        store.finish_run(store.start_run("new", "plan.toml"), "success")
    archive = tmp_path / "archive.sqlite3"
    for dry in ([], ["--dry-run"]):
        done = run_in_process(
            "prune",
            store_target,
            "--runs",
            "--before",
            "2000-01-01",
            "--archive-to",
            archive,
            "--yes",
            *dry,
        )
        assert done.returncode == 0, done.stderr
        assert "0 runs" in done.stdout and "copied" not in done.stdout, done.stdout
        assert not archive.exists()
