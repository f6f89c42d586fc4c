"""The second half of io-harness 0.66's Store API against upstream's own code (the 0.66 oracle):
memory (limits, truncation, eviction, recalls, restore points, forget, similar), summaries and
todos, questions and plans, sessions and their sizes, the mailbox, the queue, addresses and
process handles.

Rust → Python: the oracle's script writes a store; every getter of this half reads it as
upstream's `dump` does. Python → Rust: harness_store makes the same calls (the script's
transcript must match call for call), and upstream's `dump` of that store reads as ours. The
human-in-the-loop round trip: a question, an approval and a plan the oracle's script left
open are answered from Python (and from the CLI), and upstream reads the answers.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.clirun import run_in_process

from harness_store import PendingQuestion, Plan, PlanStep, PlanVerdict, Store

from .memory_sessions import compare, py, write_like_the_oracle
from .oracles import Oracles
from .releases import NEWER_WRITERS
from .rustdebug import parse

NEWEST = NEWER_WRITERS[-1]


def test_a_store_upstream_wrote_reads_the_same_through_every_new_getter(
    tmp_path: Path, oracles: Oracles
) -> None:
    path = tmp_path / "theirs.sqlite3"
    theirs = oracles.written(NEWEST, path)
    with Store.open(path, read_only=True) as store:
        assert compare(store, theirs) == []
    with Store.open(path, backup=False) as store:
        assert compare(store, theirs) == []


def test_the_same_calls_answer_as_upstream_and_our_store_reads_the_same_through_upstream(
    tmp_path: Path, oracles: Oracles
) -> None:
    theirs_path, ours_path = tmp_path / "theirs.sqlite3", tmp_path / "ours.sqlite3"
    said = dict(oracles.json(NEWEST, "write", theirs_path)["transcript"])
    with Store.open(ours_path) as store:
        ours = write_like_the_oracle(store)
    for name, value in ours:
        expected = said[name]
        if name == "set_session_head_if stale":
            assert value == "error" and "error" in expected
            continue
        theirs_value = parse(expected) if isinstance(expected, str) else expected
        if name == "read_messages":  # stamps differ between the two stores
            for message in (*value, *theirs_value):
                message["sent_at"] = message["read_at"] = "<stamp>"
        if name == "memory_similar":
            value["created_at"] = theirs_value["created_at"] = "<stamp>"
        assert value == theirs_value, name

    dump = oracles.dump(NEWEST, ours_path)
    with Store.open(ours_path, read_only=True) as store:
        assert compare(store, dump) == []
        # Both stores hold the same rows but for the clock: sizes, turns and queue agree.
        theirs_dump = oracles.dump(NEWEST, theirs_path)
        assert [s["size"] for s in dump["sessions"]] == [s["size"] for s in theirs_dump["sessions"]]
        assert dump["runs"][0]["queued_agents"] == theirs_dump["runs"][0]["queued_agents"]
        assert dump["runs"][0]["process_handles"] == theirs_dump["runs"][0]["process_handles"]


def test_a_person_answers_from_python_and_upstream_reads_the_answers(
    tmp_path: Path, oracles: Oracles
) -> None:
    path = tmp_path / "hitl.sqlite3"
    before = oracles.written(NEWEST, path)
    open_question = parse(before["question"][1])
    assert open_question["resolved"] is False
    with Store.open(path, backup=False) as store:
        [pending] = store.unresolved_approvals(1)
        assert store.resolve_pending(pending.id, "approve") is True
        assert store.answer_question(open_question["id"], "pg", "alice") is True
        assert store.answer_question(open_question["id"], "sqlite", "bob") is False
        plan = store.put_plan(1, 4, Plan([PlanStep.new("ship it").by("writer")]))
        assert store.decide_plan(plan, PlanVerdict.approve(), "alice") is True

    after = oracles.dump(NEWEST, path)
    root = after["runs"][0]
    assert parse(root["unresolved_approvals"]) == []
    answered = parse(after["question"][1])
    assert (answered["answer"], answered["answered_by"], answered["resolved"]) == (
        "pg",
        "alice",
        True,
    )
    assert parse(root["approved_plan"]) == {
        "_type": "Plan",
        "steps": [{"_type": "PlanStep", "intent": "ship it", "agent": "writer"}],
    }
    with Store.open(path, read_only=True) as store:
        assert compare(store, after) == []
        found = store.answered_question(1, 3, "unanswered?")
        assert isinstance(found, PendingQuestion) and py(found) == answered


def test_questions_and_plans_upstream_stores_as_json_read_as_upstream_reads_them(
    tmp_path: Path, oracles: Oracles
) -> None:
    path = tmp_path / "json.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("g", "f")
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(path)) as conn, conn:
        rows = [
            ('["a", "b"]', '[{"intent":"x","extra":1}]'),
            ("not json", "not json"),
            ("[1, 2]", '[{"agent":"only"}]'),
        ]
        for i, (choices, steps) in enumerate(rows):
            conn.execute(
                "INSERT INTO pending_questions (run_id, step, question, choices) VALUES (?,?,?,?)",
                (run, i, f"q{i}", choices),
            )
            conn.execute(
                "INSERT INTO plans (run_id, step, steps) VALUES (?, ?, ?)", (run, i, steps)
            )
    dump = oracles.dump(NEWEST, path)
    with Store.open(path, read_only=True) as store:
        assert compare(store, dump) == []
    assert json.loads(json.dumps([parse(q)["choices"] for q in dump["question"]])) == [
        ["a", "b"],
        [],
        [],
    ]


def test_the_shell_commands_answer_what_upstream_left_open_and_upstream_reads_it(
    tmp_path: Path, oracles: Oracles
) -> None:

    path = tmp_path / "cli.sqlite3"
    oracles.run(NEWEST, "write", path)
    with Store.open(path, backup=False) as store:
        plan = store.put_plan(1, 4, Plan([PlanStep.new("port")]))

    def cli(*args: object) -> None:
        done = run_in_process(*args)
        assert done.returncode == 0, done.stderr

    cli("answer", path, 1, "yes, go on", "--by", "carol")
    cli("approve", path, 1, "--deny")
    cli("approve", path, 1, "--plan", "--cancel", "--by", "carol")
    after = oracles.dump(NEWEST, path)
    root = after["runs"][0]
    assert parse(root["unresolved_approvals"]) == []
    assert parse(after["pending"][1])["resolved"] == "deny"
    answered = parse(after["question"][1])
    assert (answered["answer"], answered["answered_by"]) == ("yes, go on", "carol")
    decided = next(p for p in parse(root["plans"]) if p["id"] == plan)
    assert (decided["verdict"], decided["decided_by"], decided["resolved"]) == (
        "Cancel",
        "carol",
        True,
    )
