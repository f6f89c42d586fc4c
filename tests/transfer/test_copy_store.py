"""`copy_store`: whole stores SQLite → PostgreSQL → SQLite, on real databases.

Every fixture store written by a real io-harness build, a store full of hostile values written
through `Store`, and a legacy 0.13 lineage store are copied to PostgreSQL and back; the rows of
every 0.13 table must come back identical (ids, values, SQLite storage classes), and `Store`
must answer the same on the copy. Refusals (non-empty target, source below 0.13) must change
nothing; failures mid-copy must leave the target empty.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, inspect, select, text
from support import legacy
from support.pg_databases import fresh_pg_database
from support.shared import FIXTURE_STORES, FIXTURES, in_newest_memory_order
from support.tiers import sampled

import harness_store as hs
from harness_store import StepRecord, Store
from harness_store import models as m
from harness_store.engine import make_engine
from harness_store.errors import (
    ForeignDatabaseError,
    SchemaError,
    StoreNotFoundError,
    UpgradeRequiredError,
)
from harness_store.releases import SHAPES, STORE_RELEASE
from harness_store.transfer import (
    CopyError,
    CopyReport,
    TargetNotEmptyError,
    copied_columns,
    copied_tables,
    copy_store,
)

OLD = SHAPES[STORE_RELEASE]
TABLES = copied_tables(OLD)
"""The 0.13 tables: what every source here has, compared row for row."""
TABLE_NAMES = tuple(t.name for t in TABLES)
COLUMNS = {t.name: [c.name for c in copied_columns(t, OLD)] for t in TABLES}
I64_MAX = 2**63 - 1

# --- helpers -----------------------------------------------------------------------------


def rows_of(url: str | Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every 0.13 table, in primary-key order, through SQLAlchemy."""
    engine = make_engine(str(url))
    try:
        with engine.connect() as conn:
            return {
                t.name: [
                    tuple(r)
                    for r in conn.execute(
                        select(*copied_columns(t, OLD)).order_by(*t.primary_key.columns)
                    )
                ]
                for t in TABLES
            }
    finally:
        engine.dispose()


def typed_dump(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The 0.13 tables of a SQLite file with each value's storage class (1 ≠ '1' ≠ 1.0)."""
    with closing(sqlite3.connect(path)) as conn:
        return legacy.dump(conn, COLUMNS, typed=True)


def sqlite_pragma(path: Path, name: str) -> Any:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def table_names(url: str | Path) -> list[str]:
    engine = make_engine(str(url))
    try:
        with engine.connect() as conn:
            return sorted(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def answers(store: Store) -> dict[str, Any]:
    """What `Store`'s reads say about every run, workspace, request and spawn of a store."""
    with store.engine.connect() as conn:
        workspaces = sorted(conn.execute(select(m.Memory.workspace).distinct()).scalars())
        requests = sorted(conn.execute(select(m.PendingApproval.id)).scalars())
        spawns = conn.execute(select(m.Spawn.parent_run_id, m.Spawn.step, m.Spawn.goal)).all()
    out: dict[str, Any] = {"runs": store.runs(), "last_run": store.last_run()}
    for r in store.runs():
        for name in (
            "steps",
            "canonical_trace",
            "run_summary",
            "tree",
            "tree_run_ids",
            "spent_tokens_tree",
            "agent_count_tree",
            "children",
            "parent",
            "depth",
            "last_step",
            "spent_tokens",
            "status",
            "outcome",
            "provider",
            "run_status",
            "events",
            "agent_events",
            "sandbox_events",
            "checkpoint_events",
            "mcp_events",
            "context_events",
            "observations",
            "run_policy",
        ):
            out[f"{name}({r})"] = getattr(store, name)(r)
    for ws in workspaces:
        out[f"memory_list({ws!r})"] = store.memory_list(ws)
    for request in requests:
        out[f"pending({request})"] = store.pending(request)
    for parent, step, goal in spawns:
        out[f"find_spawn({parent}, {step}, {goal!r})"] = store.find_spawn(parent, step, goal)
    return out


@contextmanager
def captured_inserts() -> Iterator[list[tuple[str, int]]]:
    """(table, rows) of every INSERT into a 0.13 table any engine sends while active."""
    seen: list[tuple[str, int]] = []

    def before(conn: Any, cursor: Any, statement: str, params: Any, ctx: Any, many: bool) -> None:
        words = statement.split()
        if len(words) > 2 and words[:2] == ["INSERT", "INTO"] and words[2] in TABLE_NAMES:
            seen.append((words[2], len(params) if many else 1))

    event.listen(Engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", before)


def check_report(report: CopyReport, expected: dict[str, list[tuple[Any, ...]]]) -> None:
    old = {name: n for name, n in report.counts.items() if name in TABLE_NAMES}
    assert list(old) == list(TABLE_NAMES)
    assert old == {name: len(rows) for name, rows in expected.items()}
    assert set(report.counts) <= set(m.Base.metadata.tables)
    assert report.rows == sum(report.counts.values())
    assert "password" not in report.source + report.target


# --- whole stores, there and back ----------------------------------------------------------


@pytest.mark.parametrize("name", sampled(FIXTURE_STORES, keep=2))
def test_fixture_store_round_trips_through_postgresql(
    name: str, fixture_copy: Callable[[str], Path], pg_url: str, tmp_path: Path
) -> None:
    original = fixture_copy(name)
    before_rows = rows_of(original)
    before_typed = typed_dump(original)
    with closing(sqlite3.connect(original)) as conn:
        newer = {
            t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
            for t in legacy.user_tables(conn)
            if t not in COLUMNS
        }
    source_digest = digest(original)
    assert newer, "the fixtures are 0.22/0.28 stores with tables of their own"

    there = copy_store(str(original), pg_url, batch_size=2)
    check_report(there, before_rows)
    # every table of the fixture's release is carried, none skipped
    assert {t: n for t, n in there.counts.items() if t in newer} == newer
    assert there.skipped_tables == {}
    assert there.skipped_columns == ()
    assert there.checkpoint_format == 7
    assert rows_of(pg_url) == before_rows

    back_path = tmp_path / "back.sqlite3"
    back = copy_store(pg_url, str(back_path), batch_size=2)
    check_report(back, before_rows)
    assert back.skipped_tables == {}
    assert typed_dump(back_path) == before_typed
    assert sqlite_pragma(back_path, "user_version") == sqlite_pragma(original, "user_version")
    assert sqlite_pragma(back_path, "journal_mode") == "wal"
    # The source was opened read-only: not one byte of it changed.
    assert digest(original) == source_digest


@pytest.mark.parametrize("name", sampled(FIXTURE_STORES, keep=2))
def test_store_answers_the_same_on_the_postgresql_copy(
    name: str, fixture_copy: Callable[[str], Path], pg_url: str
) -> None:
    original = fixture_copy(name)
    copy_store(str(original), pg_url)
    with Store.open(original, backup=False) as here, Store.open(pg_url, upgrade=False) as there:
        expected = answers(here)
        assert expected["runs"], "every fixture holds runs"
        assert answers(there) == expected


def copied_rows(fixture: Path, pg_url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Copy a fixture store's copy into `pg_url`; its rows as they were before the copy."""
    rows = rows_of(fixture)
    copy_store(str(fixture), pg_url)
    return rows


def copied_with_facts(fixture: Path, pg_url: str) -> Any:
    """Copy a fixture store's copy into `pg_url`; what its io-harness build recorded about it
    (the JSON beside the original, `io-harness-0.29.0-aggregates.sqlite3` →
    `io-harness-0.29.0/aggregates.json`)."""
    copy_store(str(fixture), pg_url)
    release, name = fixture.stem.split("-", 2)[-1].split("-", 1)
    return json.loads((FIXTURES / f"io-harness-{release}" / f"{name}.json").read_text())


def test_postgresql_copy_answers_what_the_interrupted_fixture_recorded(
    fixture_copy: Callable[[str], Path], pg_url: str
) -> None:
    """What real io-harness builds recorded about their stores reads back from PostgreSQL."""
    facts = copied_with_facts(fixture_copy("io-harness-0.29.0/interrupted"), pg_url)
    with Store.open(pg_url, upgrade=False) as store:
        root = facts["root_run_id"]
        assert store.tree_run_ids(root) == facts["tree_run_ids"]
        assert store.spent_tokens_tree(root) == facts["spent_tokens_tree"]
        assert store.agent_count_tree(root) == len(facts["tree_run_ids"])
        assert (store.status(root), store.outcome(root)) == (
            facts["root_status"],
            facts["root_outcome"],
        )
        assert store.last_step(root) == facts["root_last_step"]
        for child in facts["children"]:
            run = child["run_id"]
            assert store.parent(run) == root
            assert store.depth(run) == child["depth"]
            assert store.last_step(run) == child["last_step"]
            assert store.spent_tokens(run) == child["spent_tokens"]
            assert (store.status(run), store.outcome(run)) == (child["status"], child["outcome"])


def test_postgresql_copy_answers_what_the_aggregates_fixture_recorded(
    fixture_copy: Callable[[str], Path], pg_url: str
) -> None:
    facts = copied_with_facts(fixture_copy("io-harness-0.29.0/aggregates"), pg_url)
    with Store.open(pg_url, upgrade=False) as store:
        workspace = facts["composition"]["workspace"]
        assert [
            {"key": e.key, "run_id": e.run_id, "step": e.step, "value": e.value}
            for e in store.memory_list(workspace)
        ] == in_newest_memory_order(
            "io-harness-0.29.0/aggregates", workspace, facts["read_back"]["memory"]
        )
        assert store.runs()[::-1] == facts["composition"]["run_ids"]
        for run in facts["read_back"]["runs"]:
            summary = store.run_summary(run["run_id"])
            assert summary is not None
            assert (summary.outcome, summary.success, summary.tokens) == (
                run["outcome"],
                run["success"],
                run["tokens"],
            )
            kinds = [e.kind for e in store.context_events(run["run_id"])]
            assert [k for k in kinds if k in ("served", "replan")] == run["context_kinds"]


def test_new_rows_after_a_copy_get_fresh_ids(
    fixture_copy: Callable[[str], Path], pg_url: str, tmp_path: Path
) -> None:
    source = copied_rows(fixture_copy("io-harness-0.29.0/aggregates"), pg_url)
    max_run = max(r[0] for r in source["runs"])
    max_memory = max(r[0] for r in source["memory"])
    max_event = max(r[0] for r in source["checkpoint_events"])

    with Store.open(pg_url, upgrade=False) as store:
        run = store.start_run("after the copy", "new.txt")
        assert run == max_run + 1
        store.checkpoint_step(run, StepRecord(1, "wrote", "ok", tokens=5))
        assert store.memory_put("/repo", "new key", "new value", run, 1) == []
        assert store.memory_get("/repo", "new key") is not None
        assert store.start_run("and another", "x") == max_run + 2
    copied = rows_of(pg_url)
    assert [r[0] for r in copied["steps"]] == [1]
    assert max(r[0] for r in copied["memory"]) == max_memory + 1
    assert max(r[0] for r in copied["checkpoint_events"]) == max_event + 1
    # The copied rows themselves are untouched by the new ones.
    assert copied["runs"][: len(source["runs"])] == source["runs"]

    # …and the same holds for the copy brought back to SQLite.
    back = tmp_path / "back.sqlite3"
    copy_store(pg_url, str(back))
    with Store.open(back, upgrade=False) as store:
        assert store.start_run("back home", "y") == max_run + 3


def test_every_postgresql_id_sequence_follows_the_copied_ids(
    fixture_copy: Callable[[str], Path], pg_url: str
) -> None:
    source = copied_rows(fixture_copy("io-harness-0.22.0/interrupted"), pg_url)
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            for t in TABLES:
                if "id" not in t.columns:
                    continue
                following = conn.execute(
                    text(f"SELECT nextval(pg_get_serial_sequence('{t.name}', 'id'))")
                ).scalar_one()
                assert following == max((r[0] for r in source[t.name]), default=0) + 1, t.name
    finally:
        engine.dispose()


def test_postgresql_to_postgresql(
    fixture_copy: Callable[[str], Path], pg_url: str, pg_server_url: str
) -> None:
    expected = copied_rows(fixture_copy("io-harness-0.22.0/interrupted"), pg_url)
    second = fresh_pg_database(pg_server_url)
    other = next(second)
    try:
        report = copy_store(pg_url, other, batch_size=3)
        check_report(report, expected)
        assert report.skipped_tables == {}
        assert rows_of(other) == expected
        with Store.open(other, upgrade=False) as store:
            assert store.start_run("next", "n") == max(r[0] for r in expected["runs"]) + 1
    finally:
        next(second, None)


# --- values --------------------------------------------------------------------------------

HOSTILE: tuple[str, ...] = (
    "it's a 'single' quote",
    'say "double" quotes',
    "'; DROP TABLE runs; --",
    "100% _like_ wildcards \\ backslash \\\\ double",
    "crab 🦀 family 👩\u200d👩\u200d👧 flag 🇫🇷",
    "日本語 中文 한국어",
    "combining e\u0301 a\u0308 and lone surrogate-free \U0010fffd",
    "RTL مرحبا שלום \u202eoverride\u202c",
    "",
    "tab\there\r\nCRLF\nnewline\x0b\x0c\x1b[31m",
    '{"json": [1, 2, {"k": "v"}]}',
    "   leading and trailing spaces   ",
)
LONG = ("100 KB: ascii é 🦀 日本 \u05e9 '\" ;-- \\\n" * 4000)[:100_000]


def build_hostile_store(path: Path) -> None:
    """A store written through `Store`, full of awkward texts, extreme integers and NULLs."""
    with Store.open(path) as s:
        root = s.start_run(HOSTILE[2], HOSTILE[5])
        s.set_provider(root, HOSTILE[4])
        for i, h in enumerate(HOSTILE, start=1):
            s.checkpoint_step(root, StepRecord(i, h, h, h, h, i))
        s.checkpoint_step(root, StepRecord(len(HOSTILE) + 1, "long", LONG, LONG, LONG, 0))
        child = s.start_child_run(HOSTILE[0], HOSTILE[1], root, 1)
        s.checkpoint_step(child, StepRecord(2**32 - 1, "u32 max step", "r", tokens=7))
        # The largest token count upstream can store, alone in its tree so no sum overflows.
        big = s.start_run("the biggest spender", HOSTILE[3])
        s.checkpoint_step(big, StepRecord(1, HOSTILE[4], HOSTILE[5], tokens=I64_MAX))
        s.finish_run(big, "success")
        s.record_agent_event(hs.AgentEvent.spawn(root, 1, child, HOSTILE[0]))
        s.record_agent_event(hs.AgentEvent.budget_draw(child, 1, I64_MAX, I64_MAX))
        s.record_event(root, hs.PolicyEvent.refusal(1, "read", HOSTILE[1]))  # NULL rule, layer…
        s.record_event(
            root,
            hs.PolicyEvent.refusal(2, "write", HOSTILE[3]).with_rule(HOSTILE[2], HOSTILE[7]),
        )
        request = s.put_pending(root, 1, "write", HOSTILE[3], LONG)
        s.put_pending(root, 2, "exec", HOSTILE[9], None)
        s.resolve_pending(request, HOSTILE[0])
        s.record_sandbox_event(hs.SandboxEvent.create(root, 1, HOSTILE[6]))
        s.record_sandbox_event(hs.SandboxEvent.destroy(root, 3))
        s.record_checkpoint_event(hs.CheckpointEvent.resume(root, 2, HOSTILE[7]))
        s.record_spawn(root, 1, child, HOSTILE[0], "v.txt", HOSTILE[1], None, json.dumps([LONG]))
        s.record_spawn(root, 2, child, HOSTILE[8], "", "", 2**32 - 1, "[]")
        s.record_mcp(root, hs.McpEvent.called("srv", HOSTILE[4], True).with_millis(I64_MAX))
        s.record_mcp(root, hs.McpEvent.called("srv", "t", False).at_step(2))
        s.record_mcp(root, hs.McpEvent.disconnected(HOSTILE[10]))
        s.record_context_event(root, hs.ContextEvent.assembled(1, HOSTILE[9], I64_MAX))
        s.record_context_reported(root, 1, I64_MAX)
        s.record_context_event(root, hs.ContextEvent.memory_write(2, HOSTILE[8]))
        for i, h in enumerate(HOSTILE):
            s.memory_put(HOSTILE[5], h, HOSTILE[(i + 1) % len(HOSTILE)], root, i)
        s.memory_put(HOSTILE[6], "long", LONG, child, 1)  # cut to the cap, marker kept
        s.record_run_policy(
            root,
            {"layers": [{"name": HOSTILE[10], "rules": []}], "defaults": dict.fromkeys(
                ("read", "write", "exec", "net"), "allow")},
        )  # fmt: skip
        s.record_observations(
            root,
            [
                hs.Observation(1, hs.ObsKind.READ, HOSTILE[2], LONG),
                hs.Observation(2, hs.ObsKind.MESSAGE, None, HOSTILE[7]),
            ],
        )
        s.finish_run(child, "success")
        s.finish_run(root, HOSTILE[1])
        s.start_run("crashed, still running", "c.txt")  # outcome NULL, no summary


def test_hostile_values_come_back_identical(pg_url: str, tmp_path: Path) -> None:
    source = tmp_path / "hostile.sqlite3"
    build_hostile_store(source)
    expected = rows_of(source)
    expected_typed = typed_dump(source)
    assert any(I64_MAX in row for row in expected["steps"])
    assert any(LONG in row for row in expected["steps"])
    assert any(None in row for row in expected["policy_events"])

    copy_store(str(source), pg_url, batch_size=3)
    assert rows_of(pg_url) == expected
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            got = conn.execute(text("SELECT MAX(tokens), MAX(length(result)) FROM steps")).one()
            assert tuple(got) == (I64_MAX, 100_000)
            stamps = conn.execute(text("SELECT started_at FROM runs ORDER BY id")).scalars()
            assert [s for s in stamps] == [r[-1] for r in expected["runs"]]
    finally:
        engine.dispose()

    back = tmp_path / "back.sqlite3"
    copy_store(pg_url, str(back), batch_size=3)
    assert typed_dump(back) == expected_typed
    with Store.open(source, upgrade=False) as a, Store.open(pg_url, upgrade=False) as b:
        assert answers(b) == answers(a)


def legacy_store_without_nul(path: Path) -> legacy.WrittenRows:
    """A 0.13 lineage store (every release wrote to it), its NUL characters taken out."""
    written = legacy.build_lineage(path, "0.13")
    with closing(sqlite3.connect(path)) as conn:
        for table, columns in COLUMNS.items():
            for column in columns:
                rows = conn.execute(f'SELECT rowid, "{column}" FROM {table}').fetchall()
                for rowid, value in rows:
                    if isinstance(value, str) and "\x00" in value:
                        conn.execute(
                            f'UPDATE {table} SET "{column}" = ? WHERE rowid = ?',
                            (value.replace("\x00", "<NUL>"), rowid),
                        )
        conn.commit()
    return written


def test_legacy_lineage_store_reads_the_same_through_postgresql(
    pg_url: str, tmp_path: Path
) -> None:
    """An untracked 0.13 store grown release by release: copied as it is (never upgraded),
    and upstream's own read queries answer the same on the round trip."""
    source = tmp_path / "lineage.sqlite3"
    written = legacy_store_without_nul(source)
    with closing(sqlite3.connect(source)) as conn:
        expected_answers = legacy.read_answers(conn, "0.13", written)
    expected_typed = typed_dump(source)
    source_digest = digest(source)

    copy_store(str(source), pg_url, batch_size=7)
    back = tmp_path / "back.sqlite3"
    copy_store(pg_url, str(back), batch_size=5)

    assert digest(source) == source_digest
    assert typed_dump(back) == expected_typed
    with closing(sqlite3.connect(back)) as conn:
        assert legacy.read_answers(conn, "0.13", written) == expected_answers


def test_sqlite_to_sqlite_copies_even_what_postgresql_cannot_hold(tmp_path: Path) -> None:
    source = tmp_path / "lineage.sqlite3"
    legacy.build_lineage(source, "0.13")  # texts with NUL characters inside
    target = tmp_path / "copy.sqlite3"
    copy_store(str(source), f"sqlite:///{target}")
    assert typed_dump(target) == typed_dump(source)
    assert any("nul\x00inside" in row for row in rows_of(target)["steps"])


# --- progress and batches ------------------------------------------------------------------


@pytest.mark.parametrize("direction", ["to postgresql", "to sqlite"])
def test_progress_reports_every_batch_and_rows_take_the_bulk_path(
    direction: str, fixture_copy: Callable[[str], Path], pg_url: str, tmp_path: Path
) -> None:
    original = fixture_copy("io-harness-0.22.0/interrupted")
    if direction == "to postgresql":
        source, target = str(original), pg_url
    else:
        copy_store(str(original), pg_url)
        source, target = pg_url, str(tmp_path / "back.sqlite3")
    totals = {name: len(rows) for name, rows in rows_of(original).items()}
    calls: list[tuple[str, int, int]] = []
    with captured_inserts() as inserts:
        report = copy_store(source, target, batch_size=2, progress=lambda *a: calls.append(a))
    assert report.batch_size == 2

    # Every total is announced, with nothing done yet, before the first row moves.
    announced = calls[: len(report.counts)]
    assert all(done == 0 for _, done, _ in announced)
    assert [a for a in announced if a[0] in TABLE_NAMES] == [
        (name, 0, totals[name]) for name in TABLE_NAMES
    ]
    for name in TABLE_NAMES:
        done = [d for t, d, total in calls if t == name]
        assert all(total == totals[name] for t, _, total in calls if t == name)
        assert done[0] == 0 and done[-1] == totals[name]
        assert done[1:] == sorted(set(done[1:])) and 0 not in done[1:]
        reads = -(-totals[name] // 2)  # the source is read 2 rows at a time
        assert done[1:] == [min(2 * k, totals[name]) for k in range(1, reads + 1)]
    # Rows go through the backend's bulk path: COPY into PostgreSQL (no INSERT at all),
    # executemany batches into SQLite.
    if direction == "to postgresql":
        assert inserts == []
    else:
        assert sum(n for _, n in inserts) == sum(totals.values())
    # The tables are copied one after the other, parents first (steps → runs).
    order = list(dict.fromkeys(t for t, d, _ in calls[len(report.counts) :]))
    assert order.index("runs") < order.index("steps")


def test_the_copy_reads_one_snapshot_while_the_source_is_written(
    fixture_copy: Callable[[str], Path], pg_url: str
) -> None:
    """An agent writing to the source mid-copy does not tear the copy: it is of one instant."""
    original = fixture_copy("io-harness-0.22.0/interrupted")
    expected = rows_of(original)
    writer = sqlite3.connect(original, isolation_level=None)

    def write_meanwhile(table: str, done: int, total: int) -> None:
        if table == "runs" and done == 1:
            writer.execute("INSERT INTO runs (goal, file) VALUES ('late', 'late.txt')")
            writer.execute(
                "INSERT INTO steps (run_id, step, decision, result) VALUES (1, 9, 'd', 'r')"
            )

    try:
        report = copy_store(str(original), pg_url, batch_size=1, progress=write_meanwhile)
    finally:
        writer.close()
    # A closed WAL store is read as a still file; the writer that opened it meanwhile makes
    # the copy read it again through mode=ro, as of the instant that read began (after the
    # first write, before the second): either way one instant, never a torn one.
    late = report.counts["runs"] - len(expected["runs"])
    now = rows_of(original)
    assert late in (0, 1)
    copied = rows_of(pg_url)
    for name, rows in expected.items():
        grown = late if name in ("runs", "steps") else 0
        assert copied[name] == now[name][: len(rows) + grown], name
    assert len(now["runs"]) == len(expected["runs"]) + late + 1


# --- refusals ------------------------------------------------------------------------------


def test_a_non_empty_postgresql_target_is_refused_and_unchanged(
    fixture_copy: Callable[[str], Path], pg_url: str
) -> None:
    engine = create_engine(pg_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"))
            conn.execute(text("INSERT INTO notes VALUES (1, 'keep me')"))
        with pytest.raises(TargetNotEmptyError, match="not empty"):
            copy_store(str(fixture_copy("io-harness-0.22.0/populated")), pg_url)
        with engine.connect() as conn:
            assert inspect(conn).get_table_names() == ["notes"]
            assert conn.execute(text("SELECT * FROM notes")).all() == [(1, "keep me")]
    finally:
        engine.dispose()


def test_a_second_copy_into_the_same_target_is_refused(
    fixture_copy: Callable[[str], Path], pg_url: str
) -> None:
    original = fixture_copy("io-harness-0.22.0/populated")
    copy_store(str(original), pg_url)
    before = rows_of(pg_url)
    with pytest.raises(TargetNotEmptyError):
        copy_store(str(original), pg_url)
    assert rows_of(pg_url) == before


def test_a_non_empty_sqlite_target_is_refused_and_unchanged(
    fixture_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    target = tmp_path / "existing.sqlite3"
    with Store.open(target) as store:
        store.start_run("mine", "mine.txt")
    before = digest(target)
    with pytest.raises(TargetNotEmptyError):
        copy_store(str(fixture_copy("io-harness-0.22.0/populated")), str(target))
    assert digest(target) == before
    # Copying a store onto itself is the same refusal.
    with pytest.raises(TargetNotEmptyError):
        copy_store(str(target), str(target))
    assert digest(target) == before


@pytest.mark.parametrize("release", ["0.5", "0.12"])
def test_a_source_below_013_is_refused_not_upgraded(
    release: str, pg_url: str, tmp_path: Path
) -> None:
    source = tmp_path / f"born-{release}.sqlite3"
    legacy.build_born_at(source, release)
    before = digest(source)
    with pytest.raises(UpgradeRequiredError, match="upgrade it first") as refused:
        copy_store(str(source), pg_url)
    assert f"io-harness {release} store" in str(refused.value)
    assert digest(source) == before
    assert table_names(pg_url) == []
    target = tmp_path / "never.sqlite3"
    with pytest.raises(UpgradeRequiredError):
        copy_store(str(source), str(target))
    assert not target.exists()


def test_a_torn_013_source_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "torn.sqlite3"
    legacy.build_torn(source, "0.13", stop_after=legacy.torn_points("0.13")[0])
    with pytest.raises(UpgradeRequiredError, match="lacks"):
        copy_store(str(source), str(tmp_path / "t.sqlite3"))
    assert not (tmp_path / "t.sqlite3").exists()


def test_missing_empty_and_foreign_sources_are_refused(pg_url: str, tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError):
        copy_store(str(tmp_path / "absent.sqlite3"), str(tmp_path / "t.sqlite3"))
    with pytest.raises(SchemaError, match="no run store"):
        copy_store(pg_url, str(tmp_path / "t.sqlite3"))
    foreign = tmp_path / "foreign.sqlite3"
    with closing(sqlite3.connect(foreign)) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    with pytest.raises(ForeignDatabaseError):
        copy_store(str(foreign), pg_url)
    assert not (tmp_path / "t.sqlite3").exists()
    assert table_names(pg_url) == []


def test_a_target_that_cannot_be_created_is_a_copy_error(
    fixture_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    with pytest.raises(StoreNotFoundError, match="no directory"):
        copy_store(
            str(fixture_copy("io-harness-0.22.0/populated")),
            str(tmp_path / "no such directory" / "t.sqlite3"),
        )
    assert not (tmp_path / "no such directory").exists()


def test_a_read_only_source_file_can_be_copied(
    fixture_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    original = fixture_copy("io-harness-0.22.0/populated")
    original.chmod(0o444)
    target = tmp_path / "copy.sqlite3"
    copy_store(str(original), str(target))
    assert typed_dump(target) == typed_dump(original)


@pytest.mark.parametrize("batch_size", [0, -1, True, 2.5])
def test_batch_size_must_be_a_positive_int(batch_size: Any, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        copy_store(str(tmp_path / "a"), str(tmp_path / "b"), batch_size=batch_size)


# --- failures leave the target empty -------------------------------------------------------


def test_a_value_postgresql_cannot_hold_stops_the_copy_and_empties_the_target(
    pg_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "lineage.sqlite3"
    legacy.build_lineage(source, "0.13")  # "nul\x00inside" is stored in several texts
    with pytest.raises(CopyError, match=r"NUL character .* postgresql") as failed:
        copy_store(str(source), pg_url)
    assert "of the row id=" in str(failed.value)
    assert table_names(pg_url) == []


NOISE = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(100))
"""6,400 characters that do not compress: too big for PostgreSQL's memory key index."""


def store_with(path: Path, statement: str) -> Path:
    """A small hs1 store with one row written behind `Store`'s back."""
    with Store.open(path) as store:
        run = store.start_run("g", "f")
        store.checkpoint_step(run, StepRecord(1, "d", "r"))
        store.memory_put("/ws", "small", "v", run, 1)
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(statement)
        conn.commit()
    return path


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        # SQLite enforces no foreign key by default, so upstream stores can hold such rows.
        (
            "INSERT INTO steps (run_id, step, decision, result) VALUES (999, 1, 'd', 'r')",
            r"steps: its rows could not be written .*steps_run_id_fkey.*\(run_id\)=\(\d+\)",
        ),
        (
            f"INSERT INTO memory (workspace, key, value, run_id, step, created_at) "
            f"VALUES ('/ws', '{NOISE}', 'v', 1, 1, '2026-01-01T00:00:00.000Z')",
            r"memory row id=2: .*unique index",
        ),
    ],
    ids=["orphan step", "huge memory key"],
)
def test_rows_postgresql_refuses_stop_the_copy_and_empty_the_target(
    statement: str, message: str, pg_url: str, tmp_path: Path
) -> None:
    source = store_with(tmp_path / "odd.sqlite3", statement)
    with pytest.raises(CopyError, match=message):
        copy_store(str(source), pg_url)
    assert table_names(pg_url) == []
    # SQLite holds them, so a SQLite copy is faithful.
    target = tmp_path / "copy.sqlite3"
    copy_store(str(source), str(target))
    assert typed_dump(target) == typed_dump(source)


class Interrupted(Exception):
    pass


def interrupt_at(table: str) -> Callable[[str, int, int], None]:
    def progress(name: str, done: int, total: int) -> None:
        if name == table and done > 0:
            raise Interrupted(f"stopped in {name}")

    return progress


def test_an_interrupted_copy_leaves_postgresql_empty(
    fixture_copy: Callable[[str], Path], pg_url: str
) -> None:
    original = fixture_copy("io-harness-0.22.0/interrupted")
    with pytest.raises(Interrupted):
        copy_store(str(original), pg_url, batch_size=1, progress=interrupt_at("steps"))
    assert table_names(pg_url) == []
    copy_store(str(original), pg_url)  # and a retry then goes through
    assert rows_of(pg_url) == rows_of(original)


def test_an_interrupted_copy_removes_the_sqlite_file_it_created(
    fixture_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    target = tmp_path / "new.sqlite3"
    with pytest.raises(Interrupted):
        copy_store(
            str(fixture_copy("io-harness-0.22.0/interrupted")),
            str(target),
            progress=interrupt_at("runs"),
        )
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("new")) == []


def test_an_interrupted_copy_empties_an_existing_empty_sqlite_file(
    fixture_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    target = tmp_path / "empty.sqlite3"
    with closing(sqlite3.connect(target)) as conn:
        conn.execute("CREATE TABLE scratch (x)")
        conn.execute("DROP TABLE scratch")
    assert target.stat().st_size > 0
    with pytest.raises(Interrupted):
        copy_store(
            str(fixture_copy("io-harness-0.22.0/interrupted")),
            str(target),
            progress=interrupt_at("steps"),
        )
    assert target.exists()
    assert table_names(target) == []
    assert sqlite_pragma(target, "user_version") == 0
