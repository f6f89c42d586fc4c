"""`resume_point`: what a harness reads before resuming a run (`check_resumable`, then
`last_step` and `spent_tokens`) in one read, answering exactly as the three calls do — values,
refusals and their order — in one statement (one round trip on PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from support.rows import foreign_steps, make_reply, provider_call
from support.upstream_sql import set_user_version

from harness_store import CHECKPOINT_FORMAT, StepRecord, Store


def three_reads(store: Any, run_id: int) -> tuple[str, Any]:
    """What the three calls a harness makes in turn answer: their values, or the first
    error (its type and message)."""
    try:
        store.check_resumable(run_id)
        return "ok", (store.last_step(run_id), store.spent_tokens(run_id))
    except Exception as exc:
        return type(exc).__name__, str(exc)


def one_read(store: Any, run_id: int) -> tuple[str, Any]:
    try:
        return "ok", store.resume_point(run_id)
    except Exception as exc:
        return type(exc).__name__, str(exc)


def test_resume_point_answers_as_check_resumable_last_step_and_spent_tokens(
    store: Store, store_target: str
) -> None:
    fresh = store.start_run("fresh", "f")
    worked = store.start_run("worked", "f")
    store.checkpoint_steps(worked, [StepRecord(n, "d", "r", tokens=n * 10) for n in (1, 2, 2, 3)])
    finished = store.start_run("finished", "f")
    store.checkpoint_step(finished, StepRecord(4, "d", "r", tokens=5))
    store.finish_run(finished, "success")
    answering, answered = store.start_run("hi", "f"), store.start_run("hello", "f")
    for reply in (answering, answered):
        store.checkpoint_step(reply, StepRecord(1, "d", "r", tokens=7))
        provider_call(store, reply, 100)
        provider_call(store, reply, None)
        make_reply(store, reply)
    store.finish_run(answered, "success")
    overflowing = store.start_run("big", "f")
    foreign_steps(store, overflowing, 2**62, 2**62)  # past the Store's door: another writer's
    overflowing_reply = store.start_run("big reply", "f")
    provider_call(store, overflowing_reply, 2**62)
    provider_call(store, overflowing_reply, 2**62)
    make_reply(store, overflowing_reply)  # still answering: refused before its spend is read

    runs = [fresh, worked, finished, answering, answered, overflowing, overflowing_reply, 99_999]
    expected = {
        fresh: ("ok", (0, 0)),
        worked: ("ok", (3, 80)),
        finished: ("ok", (4, 5)),
        answered: ("ok", (1, 100)),
    }
    for run in runs:
        answer = three_reads(store, run)
        assert expected.get(run, answer) == answer
        assert one_read(store, run) == answer, run
    assert three_reads(store, answering)[0] == "ResumeError"
    assert three_reads(store, 99_999)[0] == "ResumeError"
    assert three_reads(store, overflowing)[0] in ("IntegerOverflowError", "StoreError")
    assert three_reads(store, overflowing_reply)[0] == "ResumeError"

    set_user_version(store_target, CHECKPOINT_FORMAT + 1)  # a newer format refuses every run
    for run in runs:
        answer = three_reads(store, run)
        assert answer[0] == "ResumeError"
        assert one_read(store, run) == answer


@contextmanager
def statements_counted(store: Store, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The statements `store` sends its database in the block: on SQLite every statement
    SQLite runs on the Store's connection, on PostgreSQL every round trip of psycopg (a
    statement executed, or a commit or rollback of a transaction)."""
    sent: list[str] = []
    if store.backend.name == "sqlite":
        raw = store._raw

        def traced(statement: str) -> None:
            if not statement.startswith("-- "):  # a part of the statement (a pragma it reads)
                sent.append(statement)

        raw.set_trace_callback(traced)
        try:
            yield sent
        finally:
            raw.set_trace_callback(None)
        return
    import psycopg

    def counted(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            sent.append(name if name != "execute" else str(args[0])[:60])
            return method(self, *args, **kwargs)

        return call

    with monkeypatch.context() as patched:
        patched.setattr(psycopg.Cursor, "execute", counted("execute", psycopg.Cursor.execute))
        patched.setattr(psycopg.Connection, "commit", counted("COMMIT", psycopg.Connection.commit))
        patched.setattr(
            psycopg.Connection, "rollback", counted("ROLLBACK", psycopg.Connection.rollback)
        )
        yield sent


def test_resume_point_is_one_statement(store_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store.open(store_target) as store:
        run = store.start_run("goal", "f")
        store.checkpoint_step(run, StepRecord(1, "d", "r", tokens=3))
        three_reads(store, run)  # what is asked once per Store (the store's shape) is asked
        one_read(store, run)
        with statements_counted(store, monkeypatch) as sent:
            assert store.resume_point(run) == (1, 3)
        assert len(sent) == 1, sent
        with statements_counted(store, monkeypatch) as sent:
            three_reads(store, run)
        assert len(sent) == 3, sent


def test_resume_point_reads_a_store_of_an_older_release_read_only(fixture_copy: Any) -> None:
    """A read-only Store on a store io-harness 0.22 wrote (no turn kinds yet): the same
    answers as the three calls, run by run."""
    path = fixture_copy("io-harness-0.22.0/populated")
    with Store.open(path, read_only=True) as store:
        for run in [*store.runs(), 99_999]:
            answer = three_reads(store, run)
            assert one_read(store, run) == answer
        assert [three_reads(store, run)[0] for run in store.runs()] == ["ok"] * len(store.runs())
