"""`Store.check` on hostile values: step numbers up to 2⁶³−1 cost no more than small ones, and a
value of the wrong type or form is a finding, never a raw error.

The values are planted as another writer would leave them (raw SQL on the store's file or
database); SQLite keeps whatever it is given in a column of another type, PostgreSQL only text
in a text column.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from support.policies import PERMISSIVE_POLICY

from harness_store import AgentEvent, Store
from harness_store.errors import UnreadableValueError
from harness_store.records.health import ROWS_SHOWN, FindingKind

from .checkkit import kinds, plant, populated

K = FindingKind


@pytest.mark.parametrize("last", [30_000_000, 2**63 - 1])
@pytest.mark.slow_on("postgresql")
def test_gaps_below_a_huge_step_number_are_counted_not_enumerated(
    store_target: str, last: int
) -> None:
    """Before: a set of every number below the last (2.2 GB for 30 million; 2⁶³−1 never
    ended). Now the gaps are ranges found in SQL: the finding lists the first ones and counts
    them all."""
    store, runs = populated(store_target)
    root = runs["root"]
    with store:
        plant(
            store,
            f"INSERT INTO steps (run_id, step, decision, result) VALUES ({root}, {last}, 'a', 'b')",
            f"INSERT INTO checkpoint_events (run_id, step, kind) VALUES ({root}, {last}, "
            "'checkpoint')",
        )
        report = store.check()
    (gap,) = report.findings
    assert gap.kind is K.STEP_GAP
    assert gap.rows == tuple(range(4, 4 + ROWS_SHOWN))
    assert gap.count == last - 4  # 4 … last − 1
    assert f"4–{last - 1}" in gap.detail
    assert len(gap.detail) < 500


@pytest.mark.slow_on("postgresql")
def test_gaps_are_named_as_ranges(store_target: str) -> None:
    store, runs = populated(store_target)
    root = runs["root"]
    with store:
        plant(
            store,
            *(
                f"INSERT INTO steps (run_id, step, decision, result) VALUES ({root}, {n}, 'a', 'b')"
                for n in (5, 9, 12)
            ),
            *(
                f"INSERT INTO checkpoint_events (run_id, step, kind) VALUES ({root}, {n}, "
                "'checkpoint')"
                for n in (5, 9, 12)
            ),
        )
        report = store.check()
    assert kinds(report) == [("step_gap", "steps", (4, 6, 7, 8, 10, 11))]
    assert "no step 4, 6–8, 10–11 below its last step 12" in report.findings[0].detail
    assert report.findings[0].count == 6


# (statements, the finding's kind and table, whether only SQLite can hold the value)
VALUES: dict[str, tuple[Callable[[dict[str, int]], list[str]], tuple[str, str], bool]] = {
    "a text step number": (
        lambda r: [
            f"UPDATE steps SET step = 'x' WHERE run_id = {r['root']} AND decision = 'retry'"
        ],
        ("wrong_type", "steps"),
        True,
    ),
    "text tokens": (
        lambda r: [f"UPDATE provider_calls SET total_tokens = 'lots' WHERE run_id = {r['root']}"],
        ("wrong_type", "provider_calls"),
        True,
    ),
    "a number for a start time": (
        lambda r: [f"UPDATE runs SET started_at = 12345 WHERE id = {r['root']}"],
        ("bad_time", "runs"),
        False,
    ),
    "a word for a call's time": (
        lambda r: [f"UPDATE provider_calls SET at = 'yesterday' WHERE run_id = {r['root']}"],
        ("bad_time", "provider_calls"),
        False,
    ),
}


@pytest.mark.parametrize("value", list(VALUES))
@pytest.mark.slow_on("postgresql")
def test_a_value_of_the_wrong_type_or_form_is_a_finding(store_target: str, value: str) -> None:
    statements, (kind, table), sqlite_only = VALUES[value]
    store, runs = populated(store_target)
    with store:
        if sqlite_only and store.backend.name != "sqlite":
            pytest.skip("PostgreSQL's columns hold only their declared type")
        plant(store, *statements(runs))
        report = store.check()
    assert [(f.kind.value, f.table, f.count) for f in report.findings] == [(kind, table, 1)]
    (finding,) = report.findings
    assert finding.command and finding.detail and finding.upstream
    assert len(finding.rows) == 1 and "values" in report.checks


@pytest.mark.slow_on("postgresql")
def test_a_lease_with_stamps_that_are_no_time_is_named_and_refused_typed(store_target: str) -> None:
    """Before: called healthy, while `run_lease` and `acquire_lease` raised a bare
    ValueError. io-harness's own read of the row fails too (its `strftime` of the stamp is
    NULL), so the reads refuse it typed."""
    store, runs = populated(store_target)
    child = runs["child"]
    with store:
        plant(
            store,
            f"UPDATE run_leases SET acquired_at = 'x', renewed_at = 'y' WHERE run_id = {child}",
        )
        report = store.check()
        assert kinds(report) == [
            ("bad_time", "run_leases", (child,)),
            ("bad_time", "run_leases", (child,)),
        ]
        with pytest.raises(UnreadableValueError, match="renewed_at is 'y'"):
            store.run_lease(child)
        with pytest.raises(UnreadableValueError):
            store.acquire_lease(child, 60)
        assert store.check() == report  # the refused acquire changed nothing


# Each kind of value io-harness could not read back, in each kind of table: (table, column,
# the SQL value, the finding's kind). Written with `sqlite3` itself, as a foreign writer does.
FOREIGN: list[tuple[str, str, str, str]] = [
    # append-only
    ("steps", "decision", "x'00ff10'", "wrong_type"),  # a BLOB in TEXT
    ("steps", "result", "CAST(x'6f6bff' AS TEXT)", "not_utf8"),  # bytes that are not UTF-8
    ("steps", "prompt", "'a' || char(0) || 'b'", "nul_in_text"),
    ("steps", "tokens", "9e999", "wrong_type"),  # Infinity in INTEGER
    ("provider_calls", "latency_ms", "'slow'", "wrong_type"),  # text in INTEGER
    ("provider_calls", "total_tokens", "1.5", "wrong_type"),  # a fraction in INTEGER
    ("agent_events", "tokens", "18446744073709551615", "wrong_type"),  # out of range: a REAL
    # updated in place
    ("runs", "goal", "x'ff'", "wrong_type"),
    ("runs", "status", "CAST(x'c3' AS TEXT)", "not_utf8"),
    ("runs", "file", "char(0)", "nul_in_text"),
    ("runs", "started_at", "CAST(x'32303236ff' AS TEXT)", "not_utf8"),  # and no time either
    # memory, keyed by text (workspace, key)
    ("memory", "key", "CAST(x'80' AS TEXT)", "not_utf8"),
    ("memory", "value", "'v' || char(0)", "nul_in_text"),
    ("memory", "workspace", "x'2f77'", "wrong_type"),
    # a JSON document io-harness parses, keyed by its run
    ("run_policies", "policy", """'{"layers":[],"defaults":{"x":NaN}}'""", "not_json"),
    # leases
    ("run_leases", "ttl_secs", "1099511627776", "lease_expiry"),  # past the year 9999
    ("run_leases", "generation", str(2**63 - 1), "lease_expiry"),  # no take-over can raise it
    ("run_leases", "owner", "x'01'", "wrong_type"),
]


def test_every_value_io_harness_could_not_read_back_is_named(tmp_path: Path) -> None:
    """Before: non-UTF-8 text, a BLOB or a number in a TEXT column, NUL in text and a lease
    whose expiry no stamp can hold passed `check`. Now each is a finding naming its table,
    column and row; the pass stays one aggregate query per table (a second read only of the
    rows that hold a byte outside ASCII, to check their UTF-8)."""
    path = str(tmp_path / "runs.sqlite3")
    store, runs = populated(path)
    with store:
        run = runs["root"]
        store.record_agent_event(AgentEvent.budget_draw(run, 1, 5, 5))
        store.memory_put("/ws", "k", "v", run, 1)
        store.acquire_lease(run, 60)
        store.record_run_policy(run, PERMISSIVE_POLICY)
    planted: list[tuple[str, str, int, str]] = []
    with sqlite3.connect(path) as conn:
        for table, column, value, kind in FOREIGN:
            key = "run_id" if table in ("run_leases", "run_policies") else "id"
            (row,) = conn.execute(f"SELECT min({key}) FROM {table}").fetchone()
            conn.execute(f"UPDATE {table} SET {column} = {value} WHERE {key} = {row}")
            planted.append((table, column, int(row), kind))
    conn.close()
    with Store.open(path, read_only=True) as store:
        report = store.check()
    missing = [
        p
        for p in planted
        if not any(
            f.kind.value == p[3]
            and f.table == p[0]
            and f"{p[0]}.{p[1]}" in f.detail
            and p[2] in f.rows
            for f in report.findings
        )
    ]
    assert not missing, (missing, [(f.kind.value, f.table, f.detail) for f in report.findings])
    for finding in report.findings:
        assert finding.detail and finding.upstream and (finding.command or finding.repair)


@pytest.mark.slow_on("postgresql")
def test_leases_io_harness_cannot_use_are_named(store_target: str) -> None:
    """Before: a lease whose ttl is negative or puts its expiry past the year 9999, or whose
    generation no take-over can raise, was called healthy (the reads of it raised a raw
    OverflowError)."""
    store, runs = populated(store_target)
    child = runs["child"]
    with store:
        other = store.start_run("other", "x")
        store.acquire_lease(other, 60)
        plant(
            store,
            f"UPDATE run_leases SET ttl_secs = {2**40} WHERE run_id = {child}",
            f"UPDATE run_leases SET generation = {2**63 - 1} WHERE run_id = {other}",
        )
        report = store.check()
    assert kinds(report) == [("lease_expiry", "run_leases", (child, other))]
    (finding,) = report.findings
    assert finding.count == 2 and "past the year 9999" in finding.detail
