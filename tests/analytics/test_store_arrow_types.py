"""`Store.arrow`, `iter_arrow` and `frame`: every table of the newest release, on both
backends, holds exactly the store's rows with upstream's types restored."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from sqlalchemy import update
from support import rows
from support.clirun import run_in_process

from harness_store import ProviderCall, StepRecord, Store, models
from harness_store.analytics import TABLES
from harness_store.arrow.schema import ARROW_TYPES, Kind, shape_of
from harness_store.errors import InvalidValueError, UnreadableValueError
from harness_store.formats import step_tool_calls

from .reference import BIG_U64, stored_rows

STAMP = pa.timestamp("us", tz="UTC")


def assert_table_is_the_stores(store: Store, table: str) -> None:
    """Row count, every value and every type of `table` as Arrow equal the stored rows as
    upstream reads them."""
    shape = shape_of(table)
    data = store.arrow(table)
    expected = stored_rows(store, table)
    assert data.num_rows == len(expected), table
    got = data.select(list(shape.kinds)).to_pylist()
    assert got == expected, table
    for name, kind in shape.kinds.items():
        assert data.schema.field(name).type == ARROW_TYPES[kind], (table, name)


@pytest.mark.slow_on("postgresql")
def test_every_table_of_a_store_written_through_every_method(written: Store) -> None:
    populated = [t for t in TABLES if written.arrow(t).num_rows]
    # The writers reach every table of the newest release.
    assert set(populated) == set(TABLES)
    for table in TABLES:
        assert_table_is_the_stores(written, table)


@pytest.mark.slow_on("postgresql")
def test_every_table_of_the_real_fixtures_upgraded(upgraded_fixture: Store) -> None:
    for table in TABLES:
        assert_table_is_the_stores(upgraded_fixture, table)
    for run in upgraded_fixture.runs():
        steps = upgraded_fixture.arrow("steps", runs=[run]).to_pylist()
        records = upgraded_fixture.steps(run)
        assert [(s["step"], s["decision"], s["result"], s["prompt"], s["tool_call"],
                 s["tokens"]) for s in steps] == [
            (r.step, r.decision, r.result, r.prompt, r.tool_call, r.tokens) for r in records
        ]  # fmt: skip


def test_types_are_upstreams(written: Store) -> None:
    runs = written.arrow("runs")
    assert runs.schema.field("started_at").type == STAMP
    steps = written.arrow("steps")
    assert steps.schema.field("tokens").type == pa.int64()
    mcp = written.arrow("mcp_events")
    assert mcp.schema.field("ok").type == pa.bool_()
    assert mcp.schema.field("millis").type == pa.int64()
    outcomes = written.arrow("run_outcomes")
    assert outcomes.schema.field("success").type == pa.bool_()
    assert outcomes.schema.field("finished_at").type == STAMP
    calls = written.arrow("provider_calls")
    assert calls.schema.field("prompt_tokens").type == pa.int64()
    assert calls.schema.field("at").type == STAMP  # `YYYY-MM-DD HH:MM:SS` text
    assert written.arrow("memory_recalls").schema.field("at").type == STAMP


def unsigned(column: pa.ChunkedArray) -> list[int | None]:
    """A wrapped column read as upstream reads it: the signed value's bits as `u64`."""
    return column.cast(pa.uint64(), safe=False).to_pylist()


def test_wrapped_u64_fields_are_the_signed_values_the_store_keeps(written: Store) -> None:
    millis = written.arrow("mcp_events")["millis"]
    assert millis.type == pa.int64()
    assert -1 in millis.to_pylist()  # upstream's u64::MAX, stored as -1
    assert BIG_U64 in unsigned(millis)
    context = written.arrow("context_events")
    assert any(e == BIG_U64 and r == 2**63 + 5 for e, r in zip(unsigned(context["est_tokens"]),
               unsigned(context["reported_tokens"]), strict=True))  # fmt: skip
    for run in written.runs():
        by_getter = [e.millis for e in written.mcp_events(run)]
        assert unsigned(written.arrow("mcp_events", runs=[run])["millis"]) == by_getter
        by_getter = [(e.est_tokens, e.reported_tokens) for e in written.context_events(run)]
        got = written.arrow("context_events", runs=[run])
        assert list(zip(unsigned(got["est_tokens"]), unsigned(got["reported_tokens"]),
                        strict=True)) == by_getter  # fmt: skip


def test_values_equal_the_stores_getters(written: Store) -> None:
    for run in written.runs():
        calls = written.arrow("provider_calls", runs=[run]).to_pylist()
        assert [(c["step"], c["attempt"], c["provider"], c["model"], c["latency_ms"],
                 c["ttft_ms"], c["finish_reason"], c["failure"]) for c in calls] == [
            (p.step, p.attempt, p.provider, p.model, p.latency_ms, p.ttft_ms, p.finish_reason,
             p.failure) for p in written.provider_calls(run)
        ]  # fmt: skip
        assert [c["total_tokens"] for c in calls] == [
            None if p.usage is None else p.usage.total_tokens for p in written.provider_calls(run)
        ]
        mcp = written.arrow("mcp_events", runs=[run]).to_pylist()
        assert [(e["step"], e["kind"], e["server"], e["tool"], e["ok"], e["detail"])
                for e in mcp] == [(e.step, e.kind, e.server, e.tool, e.ok, e.detail)
                                  for e in written.mcp_events(run)]  # fmt: skip
        summary = written.run_summary(run)
        outcome = written.arrow("run_outcomes", runs=[run]).to_pylist()
        if summary is None:
            assert outcome == []
        else:
            (row,) = outcome
            assert (row["outcome"], row["success"], row["steps"], row["tokens"],
                    row["duration_ms"]) == (summary.outcome, summary.success, summary.steps,
                                            summary.tokens, summary.duration_ms)  # fmt: skip
            assert row["finished_at"] == stamp(summary.finished_at)
        status = written.arrow("runs", runs=[run], columns=["status"])["status"].to_pylist()
        assert status == [written.status(run)]
        questions = written.arrow("pending_questions", runs=[run]).to_pylist()
        assert [(q["question"], q["choice_list"] or [], q["resolved"]) for q in questions] == [
            (q.question, q.choices, q.resolved) for q in written.questions(run)
        ]
        plans = written.arrow("plans", runs=[run]).to_pylist()
        assert [(p["resolved"], [s["intent"] for s in p["plan_steps"]]) for p in plans] == [
            (p.resolved, [s.intent for s in p.plan.steps]) for p in written.plans(run)
        ]
    memory = written.arrow("memory").to_pylist()
    for workspace in {m["workspace"] for m in memory}:
        entries = written.memory_list(workspace)
        rows = {m["key"]: m for m in memory if m["workspace"] == workspace}
        assert len(rows) == len(entries)
        for entry in entries:
            row = rows[entry.key]
            assert (row["value"], row["pinned"] or False, row["created_at"]) == (
                entry.value, entry.pinned, stamp(entry.created_at)
            )  # fmt: skip


def stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def test_parsed_columns_beside_the_json(written: Store) -> None:
    steps = written.arrow("steps").to_pylist()
    called = [s for s in steps if s["tool"] is not None]
    assert called, "the writers record steps that called a tool"
    for s in steps:
        assert s["tool_calls"] == calls_of(s["tool_call"]), s
        first = s["tool_calls"][0] if s["tool_calls"] else {"name": None, "arguments": None}
        assert (s["tool"], s["tool_args"]) == (first["name"], first["arguments"]), s
    policies = written.arrow("run_policies").to_pylist()
    for row in policies:
        document = written.run_policy(row["run_id"])
        assert document is not None
        assert row["policy_defaults"] == {
            act: document["defaults"].get(act) for act in ("read", "write", "exec", "net")
        }
        assert row["policy_layers"] == [layer["name"] for layer in document["layers"]]
    turns = written.arrow("step_turns").to_pylist()
    assert turns
    for run in {row["run_id"] for row in turns}:
        by_getter = [[c.name for c in turn.calls] for turn in written.step_turns(run)]
        assert [r["call_names"] for r in turns if r["run_id"] == run] == by_getter


def test_iter_arrow_streams_batches_that_add_up_to_the_table(written: Store) -> None:
    batches = list(written.iter_arrow("memory_snapshots", batch_rows=7))
    assert len(batches) > 1
    assert all(b.num_rows <= 7 for b in batches)
    assert pa.Table.from_batches(batches).equals(written.arrow("memory_snapshots"))


def test_filters_and_columns(written: Store) -> None:
    runs = written.runs()
    some = runs[:2]
    steps = written.arrow("steps", runs=some)
    assert set(steps["run_id"].to_pylist()) <= set(some)
    assert steps.num_rows == sum(len(written.steps(r)) for r in some)
    chosen = written.arrow("steps", columns=["tool", "run_id"])
    assert chosen.column_names == ["tool", "run_id"]
    assert written.arrow("runs", since="2999-01-01").num_rows == 0
    assert written.arrow("steps", since="2999-01-01").num_rows == 0
    assert written.arrow("steps", since="2000-01-01").num_rows == written.arrow("steps").num_rows


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.arrow("nope"),
        lambda s: s.arrow("steps", columns=["nope"]),
        lambda s: s.arrow("steps", since="yesterday"),
        lambda s: s.arrow("steps", columns=["origin"]),
        lambda s: s.arrow("steps", runs=["1"]),
        lambda s: s.frame("steps", engine="spark"),
    ],
)
def test_bad_input_is_a_typed_error(written: Store, call: object) -> None:
    with pytest.raises(InvalidValueError):
        call(written)  # type: ignore[operator]


def test_frames_are_the_same_arrow_data(written: Store) -> None:
    import pandas as pd
    import polars as pl

    data = written.arrow("provider_calls")
    frame = written.frame("provider_calls")
    assert isinstance(frame, pd.DataFrame)
    assert pa.Table.from_pandas(frame, preserve_index=False).equals(data)
    assert str(frame["prompt_tokens"].dtype) == "int64[pyarrow]"
    polars = written.frame("provider_calls", engine="polars")
    assert isinstance(polars, pl.DataFrame)
    assert polars.to_arrow().cast(data.schema).equals(data)
    assert polars.schema["at"] == pl.Datetime("us", "UTC")
    assert polars.schema["prompt_tokens"] == pl.Int64


def test_every_kind_has_an_arrow_type() -> None:
    assert set(ARROW_TYPES) == set(Kind)


TOOL_CALLS = [
    'read_file:{"path":"a"}', "a.b-c_D9:", "x:y:z", 't:{\n"multi":"line"}', "é:1", ":no name",
    "bad tool:x", "no colon at all", "", None, "edit_file:ü", "tool:" + "x" * 5000,
    'a:{"x":"p | q"} | b:[1,2]', 'a:{"x":1} | ', 'a:{"x":1}|b:{}', 'a:{"x":"\\n"}', "t:1",
    '{"path":"p"}', '{"path":"p"} | a:{}', 'a:{"x":1}  ', 'a:{"x":1}{"y":2}',
]  # fmt: skip


def calls_of(text: str | None) -> list[dict[str, str]] | None:
    """The reference: upstream's grammar (`formats.step_tool_calls`) row by row."""
    calls = step_tool_calls(text or "")
    return None if calls is None else [{"name": n, "arguments": a} for n, a in calls]


def test_tool_calls_read_by_upstreams_grammar_at_every_batch_boundary(store_target: str) -> None:
    """`tool_calls` is each call's name and arguments as the grammar reads them (several
    joined by " | ", which may also stand inside an argument); `tool` and `tool_args` the
    first call's; text in no form of the grammar is null in all three."""
    with Store.open(store_target) as store:
        run = store.start_run("g", "f.rs")
        store.checkpoint_steps(
            run,
            [StepRecord.new(n, "d", "ok").with_trace("p", call or "", n)
             for n, call in enumerate(TOOL_CALLS, 1)],
        )  # fmt: skip
        for batch_rows in (1, 3, 64):  # the split holds at every batch boundary
            rows = pa.Table.from_batches(
                list(store.iter_arrow("steps", batch_rows=batch_rows))
            ).to_pylist()
            for row in rows:
                calls = calls_of(row["tool_call"])
                assert row["tool_calls"] == calls, row["tool_call"]
                first = calls[0] if calls else {"name": None, "arguments": None}
                assert (row["tool"], row["tool_args"]) == (first["name"], first["arguments"])


@pytest.mark.parametrize(
    ("change", "step", "named"),
    [
        ("tokens = 'many'", 2, "its tokens is 'many', not an integer"),
        ("tokens = 1e999", 2, "its tokens is inf, not an integer"),
        ("tokens = 2.5", 2, "its tokens is 2.5, not an integer"),
        ("prompt = X'70FF71'", 3, "its prompt is b'p\\xffq', bytes that are not UTF-8 text"),
        ("prompt = X'7071'", 3, "its prompt is b'pq', bytes, not text"),
        ("prompt = 12", 1, None),  # TEXT affinity: SQLite keeps the text '12'
    ],
)
def test_a_value_no_column_of_its_type_holds_is_refused_by_name(
    tmp_path: Path, change: str, step: int, named: str | None
) -> None:
    """SQLite keeps what it was given: text or Infinity in an integer column, bytes in a text
    column. Such a value is never read as null or with replacement characters: the read is
    refused, naming the table, the row, the column and the value, as io-harness's own read of
    the row fails; `export parquet` writes nothing."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("g", "f.rs")
        store.checkpoint_steps(
            run, [StepRecord.new(n, "d", "ok").with_trace("p", "t:{}", n) for n in (1, 2, 3)]
        )
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(f"UPDATE steps SET {change} WHERE step = ?", (step,))
    with Store.open(path, read_only=True) as store:
        if named is None:
            assert len(store.arrow("steps", columns=["step", "prompt"])) == 3
            return
        with pytest.raises(UnreadableValueError) as refused:
            store.arrow("steps", columns=["step", "tokens", "prompt", "tool"])
        assert f"steps row step {step}: {named}" in str(refused.value)
    done = run_in_process("export", "parquet", path, tmp_path / "out")
    assert done.returncode != 0
    assert f"steps row id {step}: {named}" in done.stderr  # the whole table: named by its key
    assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "out" / "_manifest.json").exists()


def test_since_is_an_instant_whatever_the_columns_spelling(store_target: str) -> None:
    """`provider_calls.at` holds SQLite's `datetime('now')` spelling (a space, seconds) where
    `runs.started_at` holds upstream's `…T…Z`: `since` keeps or drops each row by its instant,
    not by how its text sorts (a space sorts before a `T`)."""
    with Store.open(store_target) as store:
        run = store.start_run("g", "f")
        store.checkpoint_steps(run, [StepRecord.new(1, "d", "ok")])
        store.record_provider_call(run, ProviderCall(step=1, attempt=1, provider="p"))
        rows.execute(store, update(models.ProviderCall).values(at="2026-12-07 06:51:00"))
        rows.execute(store, update(models.Run).values(started_at="2026-12-07T06:50:00.000Z"))
        assert store.arrow("provider_calls", since="2026-12-07T00").num_rows == 1
        assert store.arrow("provider_calls", since="2026-12-07").num_rows == 1
        assert store.arrow("provider_calls", since="2026-12-07T06:51:00Z").num_rows == 1
        assert store.arrow("provider_calls", since="2026-12-07 06:51:00.001").num_rows == 0
        assert store.arrow("provider_calls", since="2026-12-07T06:51:01+00:00").num_rows == 0
        assert store.arrow("provider_calls", since="2026-12-07T08:51+02:00").num_rows == 1
        assert store.arrow("provider_calls", since="2026-12-08").num_rows == 0
        assert store.arrow("runs", since="2026-12-07 23:59").num_rows == 0
        assert store.arrow("runs", since="2026-12-07 06:50").num_rows == 1
        assert store.arrow("runs", since="2026-12-07T06:50:00.0005Z").num_rows == 0
        assert store.arrow("runs", since="2026-12-07T11:50+05:00").num_rows == 1
        assert store.arrow("runs", since="2026-12-06T23:59:59.999Z").num_rows == 1
        assert store.arrow("provider_calls", since="2026-12-06T23:59:59.9999Z").num_rows == 1
        assert store.arrow("steps", since="2026-12-07 23:59").num_rows == 0
        assert store.arrow("steps", since="2026-12-07T00").num_rows == 1
