"""A step's several tool calls are several in Arrow: `steps.tool_calls` (a list of `{name,
arguments}`), every argument valid JSON or null, so DuckDB's and polars' JSON functions run
over the whole column — on the real 0.29 store and on arguments holding the separator."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
from conftest import copy_fixture

from harness_store import StepRecord, Store
from harness_store.analytics.dataset import export_parquet
from harness_store.formats import step_tool_calls

TOOL_CALLS = pa.list_(pa.struct([("name", pa.string()), ("arguments", pa.string())]))

WRITTEN = {
    1: 'read_file:{"path":"a | b"} | write_file:{"path":"c","content":"x | y: z"}',
    2: 'grep:{"pattern":"x | y"}',
    3: 'read_file:{"path":"src/parser.rs"}',
    4: "",  # no call
    5: '{"path":"f.rs","content":"fn main() {}"}',  # the single-file loop: write_file's arguments
    6: "read_file:{not json}",
    7: "read_file:",
    8: 'read_file:{"path":"a"} | nonsense',
    9: 'spawn_agent:{"goal":"g","deny_write":["*.lock"]} | read_file:{"path":"b"}',
    10: 'not a call at all | read_file:{"path":"a"}',
}


def expected(text: str) -> list[dict[str, str]] | None:
    calls = step_tool_calls(text)
    return None if calls is None else [{"name": n, "arguments": a} for n, a in calls]


def check_readers(directory: Path, steps: pa.Table) -> None:
    """DuckDB and polars read every argument of the dataset's steps as JSON."""
    files = f"{directory}/steps/*.parquet"
    arguments = [c["arguments"] for calls in steps["tool_calls"].to_pylist() for c in calls or []]
    unnested = duckdb.sql(
        f"SELECT json_extract(c.arguments, '$') FROM "
        f"(SELECT unnest(tool_calls) AS c FROM read_parquet('{files}'))"
    ).fetchall()
    assert len(unnested) == len(arguments)
    assert [json.loads(row[0]) for row in unnested] == [json.loads(a) for a in arguments]
    firsts = duckdb.sql(
        f"SELECT json_extract_string(tool_args, '$.path') FROM read_parquet('{files}')"
    ).fetchall()
    assert len(firsts) == steps.num_rows
    frame = pl.scan_parquet(f"{directory}/steps").collect()
    path = pl.Struct({"path": pl.String})  # decoding parses each whole value whatever it keeps
    decoded = frame.select(pl.col("tool_args").str.json_decode(path).struct.field("path"))
    assert decoded.to_series().to_list() == [p for (p,) in firsts]
    exploded = frame.select(pl.col("tool_calls").explode().struct.field("arguments"))
    paths = exploded.select(pl.col("arguments").str.json_decode(path).struct.field("path"))
    assert paths.to_series().drop_nulls().to_list() == [
        json.loads(a).get("path") for a in arguments if "path" in json.loads(a)
    ]


def test_every_call_of_a_step_with_arguments_as_json(tmp_path: Path) -> None:
    with Store.open(tmp_path / "runs.sqlite3") as store:
        run = store.start_run("g", "f.rs")
        store.checkpoint_steps(
            run,
            [StepRecord.new(n, "d", "ok").with_trace("p", text, n) for n, text in WRITTEN.items()],
        )
        steps = store.arrow("steps")
        assert steps.schema.field("tool_calls").type == TOOL_CALLS
        got = dict(zip(steps["step"].to_pylist(), steps["tool_calls"].to_pylist(), strict=True))
        assert got == {n: expected(text) for n, text in WRITTEN.items()}
        assert got[1] == [
            {"name": "read_file", "arguments": '{"path":"a | b"}'},
            {"name": "write_file", "arguments": '{"path":"c","content":"x | y: z"}'},
        ]
        assert got[4] == [] and got[6] is None and got[8] is None
        firsts = steps.select(["step", "tool", "tool_args"]).to_pylist()
        for row in firsts:
            calls = got[row["step"]]
            first = calls[0] if calls else None
            assert row["tool"] == (first and first["name"]), row
            assert row["tool_args"] == (first and first["arguments"]), row
        export_parquet(store, tmp_path / "ds")
        check_readers(tmp_path / "ds", steps)


def test_the_real_store_with_two_calls_in_one_step(tmp_path: Path) -> None:
    path = copy_fixture("io-harness-0.29.0/interrupted", tmp_path)
    with Store.open(path) as store:
        steps = store.arrow("steps")
        (first,) = [r for r in steps.to_pylist() if r["run_id"] == 1 and r["step"] == 1]
        record = store.steps(1)[0]
        assert len(record.tool_calls) == 2
        assert [(c["name"], json.loads(c["arguments"])) for c in first["tool_calls"]] == [
            (c.name, c.arguments) for c in record.tool_calls
        ]
        for row in steps.to_pylist():
            assert row["tool_calls"] == expected(row["tool_call"]), row
        export_parquet(store, tmp_path / "ds")
        check_readers(tmp_path / "ds", steps)


NON_FINITE = {
    1: 'read_file:{"path":"a","x":Inf}',
    2: 'read_file:{"path":"b","x":NaN}',
    3: 'read_file:{"path":"c","x":-Infinity}',
    4: 'read_file:{"path":"d","x":[1, Infinity]}',
    5: '{"path":"e","n":NaN}',  # the single-file loop's bare arguments
    6: 'read_file:{"path":"Info NaN: Infinity"}',  # the words inside a string: valid JSON
    7: 'read_file:{"path":"g"}',
}
"""Arguments with NaN or Infinity, which RFC 8259 has not (Python's `json.dumps` writes them,
Arrow's JSON reader and Python's `json` read them), beside rows whose every argument is an
object, so each batch takes Arrow's fast path."""


def test_nan_and_infinity_are_no_json_for_any_reader(tmp_path: Path) -> None:
    """Before: the Arrow column gave a call for `{"x":Inf}` where `StepRecord.tool_calls` gave
    none, both took `NaN` as valid JSON, and polars' `json_decode` over the column failed.
    Now one grammar decides for every reader: such arguments are no call (null), and every
    argument in the column decodes."""
    with Store.open(tmp_path / "runs.sqlite3") as store:
        run = store.start_run("g", "f.rs")
        store.checkpoint_steps(
            run,
            [StepRecord.new(n, "d", "ok").with_trace("p", t, 1) for n, t in NON_FINITE.items()],
        )
        steps = store.arrow("steps")
        got = dict(zip(steps["step"].to_pylist(), steps["tool_calls"].to_pylist(), strict=True))
        records = {s.step: s.tool_calls for s in store.steps(run)}
        for n, text in NON_FINITE.items():
            assert got[n] == expected(text), (n, got[n])
            assert [(c["name"], json.loads(c["arguments"])) for c in got[n] or []] == [
                (c.name, c.arguments) for c in records[n]
            ], n
        assert {n for n, calls in got.items() if calls} == {6, 7}
        assert all(step_tool_calls(NON_FINITE[n]) is None for n in (1, 2, 3, 4, 5))
        export_parquet(store, tmp_path / "ds")
        check_readers(tmp_path / "ds", steps)
        for n in (1, 2, 3, 4, 5):  # each alone: a batch of one takes the fast path too
            alone = Store.open(tmp_path / f"alone{n}.sqlite3")
            with alone:
                one = alone.start_run("g", "f.rs")
                alone.checkpoint_step(
                    one, StepRecord.new(1, "d", "ok").with_trace("p", NON_FINITE[n], 1)
                )
                assert alone.arrow("steps")["tool_calls"].to_pylist() == [None], n
