"""Values another writer left that io-harness could not read back (Infinity or text in an
integer column, a lease whose expiry no stamp can hold): every read path that meets one raises
`UnreadableValueError` naming the row (table, row id, column, what is wrong), never a raw
driver or Python error.

The values are written as a foreign writer leaves them: with `sqlite3` itself on a SQLite file,
with plain SQL on PostgreSQL (whose integer columns hold no text and no Infinity, so those
cases are SQLite's alone).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support.clirun import run_in_process

from harness_store import PriceTable, ProviderCall, StepRecord, Store, Usage
from harness_store.cli.app import EXIT_OTHER
from harness_store.errors import UnreadableValueError
from harness_store.records.accounting import Price
from harness_store.store.listings import Listings
from harness_store.store.trace_export import TraceExport
from harness_store.store.trace_view import TraceView


def foreign(target: str, *statements: str) -> None:
    """Run `statements` on the store as another writer would: `sqlite3` on a SQLite file, the
    server's own SQL on PostgreSQL; committed together."""
    if "://" not in target:
        with sqlite3.connect(target) as conn:
            for statement in statements:
                conn.execute(statement)
        conn.close()
        return
    engine = create_engine(target)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


# --- leases --------------------------------------------------------------------------------


@pytest.mark.parametrize("ttl", [2**40, 2**63 - 1, -1])
def test_a_foreign_lease_whose_expiry_no_stamp_can_hold_reads_as_unreadable(
    store: Store, store_target: str, ttl: int
) -> None:
    """Before: a raw OverflowError from `run_lease` and from another owner's
    `acquire_lease`. io-harness's own read of the row fails too (its `strftime` of the expiry
    is NULL past the year 9999, and for a negative ttl, which is no `'+N seconds'`)."""
    run = store.start_run("leased", "x")
    store.acquire_lease(run, 60)
    foreign(store_target, f"UPDATE run_leases SET ttl_secs = {ttl} WHERE run_id = {run}")
    named = rf"run_leases.*run_id {run}.*ttl_secs"
    with pytest.raises(UnreadableValueError, match=named):
        store.run_lease(run)
    with Store.open(store_target) as other, pytest.raises(UnreadableValueError, match=named):
        other.acquire_lease(run, 60)


def test_a_foreign_lease_at_the_largest_generation_is_not_taken_over(
    store: Store, store_target: str
) -> None:
    """A take-over raises the generation by one: from 2⁶³−1 SQLite would write a REAL (which
    no later read takes) and PostgreSQL refuse with a raw "bigint out of range". Refused
    typed, naming the row, and nothing is written."""
    run = store.start_run("leased", "x")
    store.acquire_lease(run, 0)  # lapsed at once: any other owner may take it over
    foreign(store_target, f"UPDATE run_leases SET generation = {2**63 - 1} WHERE run_id = {run}")
    before = store.run_lease(run)
    named = rf"run_leases.*run_id {run}.*generation"
    with Store.open(store_target) as other, pytest.raises(UnreadableValueError, match=named):
        other.acquire_lease(run, 60)
    assert store.run_lease(run) == before


# --- mistyped integers ---------------------------------------------------------------------

MISTYPED = {"Infinity": "9e999", "text": "'lots'", "a BLOB": "x'00ff'", "a fraction": "2.5"}
"""Values SQLite keeps in an INTEGER column that no integer read takes (PostgreSQL's integer
columns hold none of them, so these tests are SQLite's alone)."""


@pytest.fixture
def mistyped_store(tmp_path: Path) -> tuple[str, dict[str, int]]:
    """A tree of two runs with steps, both finished, written by the Store."""
    path = str(tmp_path / "runs.sqlite3")
    with Store.open(path) as store:
        root = store.start_run("root", "a")
        child = store.start_child_run("child", "b", root, 1)
        for run in (root, child):
            for n in (1, 2, 3):
                store.checkpoint_step(run, StepRecord.new(n, "act", "ok").with_trace("p", "{}", 5))
    with sqlite3.connect(path) as conn:
        (row,) = conn.execute(
            "SELECT id FROM steps WHERE run_id = ? AND step = 2", (child,)
        ).fetchone()
    conn.close()
    return path, {"root": root, "child": child, "row": int(row)}


@pytest.mark.parametrize("value", list(MISTYPED))
def test_a_mistyped_step_integer_is_named_by_every_read(
    mistyped_store: tuple[str, dict[str, int]], value: str
) -> None:
    """Before: Infinity in `steps.tokens` ended `spent_tokens`, `tree` and `harness-store runs`
    with a raw OverflowError and text there ended `export otlp` with "unexpected TypeError";
    `steps` returned the float or the text as the token count, and a fraction was summed."""
    path, ids = mistyped_store
    root, child, row = ids["root"], ids["child"], ids["row"]
    foreign(path, f"UPDATE steps SET tokens = {MISTYPED[value]} WHERE id = {row}")
    named = rf"steps row id {row}: its tokens is .*not an integer"
    with Store.open(path) as store:
        reads: dict[str, Callable[[], object]] = {
            "spent_tokens": lambda: store.spent_tokens(child),
            "spent_tokens_tree": lambda: store.spent_tokens_tree(root),
            "tree": lambda: store.tree(root),
            "resume_point": lambda: store.resume_point(child),
            "steps": lambda: store.steps(child),
            "iter_steps": lambda: list(store.iter_steps(child)),
            "span_steps": lambda: list(TraceExport(store).steps(child)),
            "trace_entries": lambda: list(TraceView(store).entries(child)),
        }
        for name, read in reads.items():
            with pytest.raises(UnreadableValueError, match=named):
                read()
            print(name, "named it")
        before = store.check()
        with pytest.raises(UnreadableValueError, match=named):
            store.finish_run(child, "success")  # its summary sums the tokens
        assert store.status(child) == "running" and store.check() == before
    for command in (["runs", path], ["export", "otlp", path, "--endpoint", "http://127.0.0.1:9"]):
        done = run_in_process(*command)
        assert done.returncode == EXIT_OTHER, done.stderr
        assert "Traceback" not in done.stderr and "unexpected" not in done.stderr
        assert re.search(named, done.stderr), done.stderr


@pytest.mark.parametrize("value", ["Infinity", "text"])
def test_a_mistyped_provider_call_integer_is_named_by_the_export(
    mistyped_store: tuple[str, dict[str, int]], value: str
) -> None:
    path, ids = mistyped_store
    with Store.open(path) as store:
        store.record_provider_call(
            ids["child"],
            ProviderCall(1, 0, "prov", "m1", Usage(prompt_tokens=10, completion_tokens=4)),
        )
    foreign(path, f"UPDATE provider_calls SET latency_ms = {MISTYPED[value]}")
    with (
        Store.open(path) as store,
        pytest.raises(UnreadableValueError, match=r"provider_calls row id \d+: its latency_ms is"),
    ):
        TraceExport(store).provider_calls(ids["child"])


@pytest.mark.parametrize("value", list(MISTYPED))
def test_a_mistyped_call_counter_is_named_by_the_spend_reads(
    mistyped_store: tuple[str, dict[str, int]], value: str
) -> None:
    """Before: `provider_calls`, `spend_by_run`, `spend_by_day` and `spend_by_model` ended
    with a raw OverflowError (Infinity) or ValueError (text) where a token counter of a call
    was no integer, and a fraction was cut to an integer."""
    path, ids = mistyped_store
    usage = Usage(prompt_tokens=10, completion_tokens=4, total_tokens=14)
    with Store.open(path) as store:
        for run in (ids["root"], ids["child"]):
            store.record_provider_call(run, ProviderCall(1, 0, "prov", "m1", usage))
    with sqlite3.connect(path) as conn:
        (row,) = conn.execute("SELECT max(id) FROM provider_calls").fetchone()
        conn.execute(
            f"UPDATE provider_calls SET prompt_tokens = {MISTYPED[value]} WHERE id = {row}"
        )
    conn.close()
    prices = PriceTable.new("2026-01").with_("m1", Price(input=1_000_000, output=2_000_000))
    named = rf"provider_calls row id {row}: its prompt_tokens is .*not an integer"
    with Store.open(path) as store:
        reads: dict[str, Callable[[], object]] = {
            "provider_calls": lambda: store.provider_calls(ids["child"]),
            "spend_by_run": lambda: store.spend_by_run(prices),
            "spend_by_day": lambda: store.spend_by_day(prices),
            "spend_by_model": lambda: store.spend_by_model(prices),
            "iter_spend_by_run": lambda: list(store.iter_spend_by_run(prices)),
            "spend_by_run since": lambda: store.spend_by_run(prices, since="2000-01-01"),
        }
        for name, read in reads.items():
            with pytest.raises(UnreadableValueError, match=named):
                read()
            print(name, "named it")
    with (
        Store.open(path, read_only=True) as store,
        pytest.raises(UnreadableValueError, match=named),
    ):
        store.spend_by_day(prices)


@pytest.mark.parametrize("value", ["Infinity", "text"])
def test_a_mistyped_run_integer_is_named_by_the_listings(
    mistyped_store: tuple[str, dict[str, int]], value: str
) -> None:
    """Before: text or Infinity in `runs.depth` came back as the depth from `run_page` and
    `tree`, and `harness-store runs` printed it."""
    path, ids = mistyped_store
    child = ids["child"]
    foreign(path, f"UPDATE runs SET depth = {MISTYPED[value]} WHERE id = {child}")
    named = rf"runs row id {child}: its depth is .*not an integer"
    with Store.open(path) as store:
        with pytest.raises(UnreadableValueError, match=named):
            Listings(store).run_page()
        with pytest.raises(UnreadableValueError, match=named):
            store.tree(ids["root"])
    done = run_in_process("runs", path)
    assert done.returncode == EXIT_OTHER and re.search(named, done.stderr), done.stderr


def test_a_call_on_the_last_day_a_stamp_can_hold_is_priced(store: Store, store_target: str) -> None:
    """Before: a call stamped on 9999-12-31 (a valid stamp) ended `spend_by_day` with a raw
    OverflowError, computing the day after it as the upper end of the day's calls."""
    prices = PriceTable.new("2026-01").with_("m1", Price(input=1_000_000, output=2_000_000))
    run = store.start_run("late", "x")
    usage = Usage(prompt_tokens=10, completion_tokens=4, total_tokens=14)
    store.record_provider_call(run, ProviderCall(1, 0, "prov", "m1", usage))
    before = store.spend_by_day(prices)
    foreign(store_target, "UPDATE provider_calls SET at = '9999-12-31T23:00:00.000Z'")
    (day,) = store.spend_by_day(prices)
    assert (
        day.key == "9999-12-31" and day.calls == 1 and day.cost_micros == before[0].cost_micros > 0
    )


@pytest.mark.parametrize("value", ["text", "Infinity"])
def test_a_mistyped_step_number_is_named_by_every_read(
    mistyped_store: tuple[str, dict[str, int]], value: str
) -> None:
    """Before: text as a step number ended `trace_entries` with a raw TypeError (comparing
    it with the numbers of the other rows) and came back from `steps` as the number."""
    path, ids = mistyped_store
    child, row = ids["child"], ids["row"]
    foreign(path, f"UPDATE steps SET step = {MISTYPED[value]} WHERE id = {row}")
    named = rf"steps row id {row}: its step is .*not an integer"
    with Store.open(path) as store:
        reads: dict[str, Callable[[], object]] = {
            "steps": lambda: store.steps(child),
            "last_step": lambda: store.last_step(child),
            "resume_point": lambda: store.resume_point(child),
            "trace_entries": lambda: list(TraceView(store).entries(child)),
            "span_steps": lambda: list(TraceExport(store).steps(child)),
            "tree": lambda: store.tree(ids["root"]),
        }
        for name, read in reads.items():
            with pytest.raises(UnreadableValueError, match=named):
                read()
            print(name, "named it")


# --- text whose bytes are not UTF-8 ---------------------------------------------------------

NOT_UTF8 = "CAST(X'70FF71' AS TEXT)"
"""Text of the bytes `p\\xffq`, as a foreign writer leaves it (SQLite keeps any bytes as text;
PostgreSQL's text is always UTF-8, so these tests are SQLite's alone)."""


def test_text_that_is_not_utf8_is_named_by_every_read(
    mistyped_store: tuple[str, dict[str, int]],
) -> None:
    """Before: each of these reads ended with a StoreError carrying the driver's "Could not
    decode to UTF-8 column 'result'", which names no row (nor the table)."""
    path, ids = mistyped_store
    root, child, row = ids["root"], ids["child"], ids["row"]
    foreign(path, f"UPDATE steps SET result = {NOT_UTF8} WHERE id = {row}")
    named = rf"steps row id {row}: its result is b'p\\xffq', not UTF-8 text"
    with Store.open(path) as store:
        reads: dict[str, Callable[[], object]] = {
            "steps": lambda: store.steps(child),
            "iter_steps": lambda: list(store.iter_steps(child)),
            "trace_entries": lambda: list(TraceView(store).entries(child)),
            "span_steps": lambda: list(TraceExport(store).steps(child)),
            "canonical_trace": lambda: store.canonical_trace(child),
        }
        for name, read in reads.items():
            with pytest.raises(UnreadableValueError, match=named):
                read()
            print(name, "named it")
        assert [s.step for s in store.steps(root)] == [1, 2, 3]  # the other run reads


@pytest.mark.parametrize(
    ("table", "column", "read"),
    [
        ("runs", "goal", lambda s, ids: s.tree(ids["root"])),
        ("memory", "value", lambda s, ids: s.memory_list("ws")),
        ("memory", "key", lambda s, ids: s.memory_list("ws")),
        ("run_leases", "owner", lambda s, ids: s.run_lease(ids["root"])),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_text_that_is_not_utf8_is_named_in_each_table_kind(
    mistyped_store: tuple[str, dict[str, int]],
    table: str,
    column: str,
    read: Callable[[Store, dict[str, int]], object],
) -> None:
    """A run (updated in place), a memory entry (keyed by text) and a lease, each read by
    the Store: the row is named, by its key."""
    path, ids = mistyped_store
    with Store.open(path) as store:
        store.memory_put("ws", "k", "v", ids["root"], 1)
        store.acquire_lease(ids["root"], 60)
    foreign(path, f"UPDATE {table} SET {column} = {NOT_UTF8}")
    with Store.open(path) as store, pytest.raises(UnreadableValueError) as raised:
        read(store, ids)
    said = str(raised.value)
    assert said.startswith(f"{table} row ") and f"its {column} is b'p\\xffq'" in said, said


# --- NaN in a step's tool calls ---------------------------------------------------------------


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_check_names_a_tool_call_whose_arguments_hold_nan(
    store: Store, store_target: str, constant: str
) -> None:
    """Before: `check` called the store healthy, while every reader of the step's calls
    (`StepRecord.tool_calls`, both exports) reads none there and io-harness's JSON reader
    refuses them. A call whose text is in no form of the grammar at all is no finding (it was
    never a call)."""
    run = store.start_run("goal", "x")
    for n in (1, 2, 3):
        store.checkpoint_step(run, StepRecord(n, "d", "r").with_trace("p", 'x:{"n":1}', 1))
    foreign(
        store_target,
        f"UPDATE steps SET tool_call = 'read_file:{{\"n\": {constant}}} | x:{{}}' WHERE step = 2",
        "UPDATE steps SET tool_call = 'just words: NaN' WHERE step = 3",
    )
    with Store.open(store_target) as reader:  # the row's id, as the exporter reads it
        (row,) = [s.id for s in TraceExport(reader).steps(run) if s.step == 2]
    (finding,) = [f for f in store.check().findings if f.table == "steps"]
    assert finding.kind.value == "not_json" and finding.rows == (row,), finding
    assert "steps.tool_call" in finding.detail and "NaN or Infinity" in finding.detail


@pytest.mark.parametrize(
    ("table", "column", "args"),
    [
        ("runs", "goal", ("runs",)),
        ("runs", "goal", ("tree", "1")),
        ("runs", "goal", ("trace", "1")),
        ("memory", "value", ("memory", "ws")),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else v,
)
def test_each_read_command_says_what_it_shows_replaced(
    tmp_path: Path, table: str, column: str, args: tuple[str, ...]
) -> None:
    """The read commands show text whose bytes are not UTF-8 with U+FFFD for those bytes, and
    say so. Before: only `trace` said it; `runs`, `tree` and `memory` replaced it silently."""
    path = str(tmp_path / "runs.sqlite3")
    with Store.open(path, backup=False) as store:
        run = store.start_run("goal", "plan")
        store.memory_put("ws", "key", "remembered", run, 1)
    foreign(path, f"UPDATE {table} SET {column} = {NOT_UTF8}")
    done = run_in_process(args[0], path, *args[1:])
    assert done.returncode == 0, done.stderr
    assert "p\ufffdq" in done.stdout
    assert done.stderr.count("held bytes that are not UTF-8") == 1, done.stderr
