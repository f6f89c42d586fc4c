"""`Store.check` names exactly the damage planted into a store, and nothing on a healthy one;
`Store.repair` fixes only what loses nothing.

Damage is planted as a second writer would leave it: raw SQL with foreign keys off, a dropped
index or trigger, a falsified `alembic_version`, a transaction cut off between its writes.
Every test that applies to both backends runs on both (`store_target`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import FIXTURE_STORES, copy_fixture
from sqlalchemy import create_engine
from support.tiers import spread

from harness_store import Store
from harness_store.engine import to_url
from harness_store.records import ProviderCall, Usage
from harness_store.records.health import FindingKind
from harness_store.releases import HEAD, REVISIONS
from harness_store.schema import migrate

from .checkkit import PRICES, checked_after, kinds, lost_lease, plant, populated

K = FindingKind


def test_a_populated_store_is_healthy(store_target: str) -> None:
    store, _ = populated(store_target)
    with store:
        report = store.check()
    assert report.findings == ()
    assert report.healthy
    assert report.revision == REVISIONS[-1]
    assert {"schema", "resume", "orphans", "trees", "leases", "spend"} <= set(report.checks)


@pytest.mark.parametrize("fixture", FIXTURE_STORES)
def test_the_real_fixtures_are_healthy_after_upgrade(fixture: str, tmp_path: Path) -> None:
    path = copy_fixture(fixture, tmp_path)
    with Store.open(path, backup=False) as store:
        report = store.check()
    assert report.findings == ()
    assert "integrity" in report.checks and "foreign_keys" in report.checks


DAMAGE: dict[
    str, tuple[Callable[[dict[str, int]], list[str]], Callable[[dict[str, int]], list]]
] = {
    "orphan rows": (
        lambda r: [
            "INSERT INTO policy_events (run_id, step, kind, act, target) "
            "VALUES (9001, 1, 'refusal', 'write', 'x')",
            "INSERT INTO run_outcomes (run_id, outcome, success, steps, tokens, finished_at) "
            "VALUES (9002, 'success', 1, 1, 1, '2026-01-01 00:00:00')",
        ],
        lambda r: [
            ("orphan", "policy_events", (9001,)),
            ("orphan", "run_outcomes", (9002,)),
        ],
    ),
    "a dropped column": (
        lambda r: ["ALTER TABLE spawns DROP COLUMN as_name"],
        lambda r: [("missing_column", "spawns", ("spawns.as_name",))],
    ),
    "an unknown column and table": (
        lambda r: ["ALTER TABLE runs ADD COLUMN mine TEXT", "CREATE TABLE notes_of_mine (x INT)"],
        lambda r: [
            ("unknown_column", "runs", ("runs.mine",)),
            ("unknown_table", "notes_of_mine", ("notes_of_mine",)),
        ],
    ),
    "a dropped index": (
        lambda r: ["DROP INDEX run_events_run"],
        lambda r: [("missing_index", "run_events", ("run_events_run",))],
    ),
    "an index on other columns": (
        lambda r: [
            "DROP INDEX run_events_run",
            "CREATE INDEX run_events_run ON run_events (depth)",
        ],
        lambda r: [("index_differs", "run_events", ("run_events_run",))],
    ),
    "an unknown index": (
        lambda r: ["CREATE INDEX mine_on_steps ON steps (decision)"],
        lambda r: [("unknown_index", "steps", ("mine_on_steps",))],
    ),
    "a falsified stamp": (
        lambda r: ["UPDATE alembic_version SET version_num = '0.30'"],
        lambda r: [("stamp", "alembic_version", ("0.30",))],
    ),
    "a cut-off transaction": (
        lambda r: [
            f"INSERT INTO steps (run_id, step, decision, result) VALUES ({r['root']}, 4, 'a', 'b')",
            "INSERT INTO checkpoint_events (run_id, step, kind) "
            f"VALUES ({r['child']}, 4, 'checkpoint')",
        ],
        lambda r: [
            ("checkpoint_without_step", "checkpoint_events", (4,)),
            ("step_without_checkpoint", "steps", (4,)),
        ],
    ),
    "a gap in the steps": (
        lambda r: [
            f"INSERT INTO steps (run_id, step, decision, result) VALUES ({r['root']}, 6, 'a', 'b')",
            f"INSERT INTO checkpoint_events (run_id, step, kind) VALUES ({r['root']}, 6, "
            "'checkpoint')",
        ],
        lambda r: [("step_gap", "steps", (4, 5))],
    ),
    "a child whose parent is missing": (
        lambda r: [f"UPDATE runs SET parent_run_id = 9003 WHERE id = {r['child']}"],
        lambda r: [("missing_parent", "runs", (r["child"],))],
    ),
    "a spawn cycle": (
        lambda r: [f"UPDATE runs SET parent_run_id = {r['child']} WHERE id = {r['root']}"],
        lambda r: [("spawn_cycle", "runs", (r["root"], r["child"]))],
    ),
    "a lease of a missing run": (
        lambda r: [lost_lease(9004)],
        lambda r: [("lease_of_missing_run", "run_leases", (9004,))],
    ),
    "a kept spend answer the counter still trusts": (
        lambda r: [f"UPDATE hs_spend_priced_runs SET calls = calls + 1 WHERE run_id = {r['root']}"],
        lambda r: [("spend_counter", "hs_spend_runs", (r["root"],))],
    ),
    "calls with no counter": (
        lambda r: [f"DELETE FROM hs_spend_runs WHERE run_id = {r['child']}"],
        lambda r: [("spend_counter", "hs_spend_runs", (r["child"],))],
    ),
    "a dropped trigger": (
        lambda r: ["DROP TRIGGER hs_spend_insert"],
        lambda r: [("missing_trigger", "provider_calls", ("hs_spend_insert",))],
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.slow_on("postgresql")
def test_check_names_exactly_the_planted_damage(store_target: str, damage: str) -> None:
    store, runs = populated(store_target)
    statements, expected = DAMAGE[damage]
    with store:
        planted = statements(runs)
        if damage == "a dropped trigger" and store.backend.name == "postgresql":
            planted = ["DROP TRIGGER hs_spend_insert ON provider_calls"]
        plant(store, *planted)
        report = store.check()
    assert kinds(report) == sorted(expected(runs))
    for finding in report.findings:
        assert finding.detail and finding.upstream
        # a missing column or table, and a gap, are told by what io-harness does about them
        told = finding.kind in (K.STEP_GAP, K.MISSING_COLUMN, K.MISSING_TABLE)
        assert finding.repairable or finding.command or told


def test_orphan_steps_written_with_foreign_keys_off_are_named(tmp_path: Path) -> None:
    store, _ = populated(str(tmp_path / "runs.sqlite3"))
    with store:
        plant(
            store,
            "INSERT INTO steps (run_id, step, decision, result) VALUES (9005, 1, 'a', 'b')",
            foreign_keys_off=True,
        )
        report = store.check()
    # foreign_key_check sees the same rows; they are named once, per run, as orphans
    assert kinds(report) == [("orphan", "steps", (9005,))]
    assert report.findings[0].command == (
        "DELETE FROM steps WHERE run_id NOT IN (SELECT id FROM runs)"
    )


def test_a_damaged_file_is_named_by_integrity_check(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    store, _ = populated(str(path))
    store.close()
    # An index entry without its row: the table's rows change under the index behind
    # SQLite's back (writable_schema), a corruption integrity_check reports.
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.exec_driver_sql("PRAGMA writable_schema = ON")
        conn.exec_driver_sql(
            "UPDATE sqlite_master SET sql = 'CREATE INDEX hs_steps_run_id_step_id_tokens "
            "ON steps (decision, id)' WHERE name = 'hs_steps_run_id_step_id_tokens'"
        )
    engine.dispose()
    with Store.open(path, read_only=True) as reader:
        report = reader.check()
    assert [f.kind for f in report.findings] == [K.INTEGRITY, K.INDEX_DIFFERS]
    assert "hs_steps_run_id_step_id_tokens" in report.findings[0].detail
    assert report.findings[1].rows == ("hs_steps_run_id_step_id_tokens",)


def test_repair_fixes_what_loses_nothing_and_reports_the_rest(store_target: str) -> None:
    store, runs = populated(store_target)
    with store:
        drop = "DROP TRIGGER hs_spend_insert"
        if store.backend.name == "postgresql":
            drop += " ON provider_calls"
        plant(
            store,
            "DROP INDEX run_events_run",
            "DROP INDEX rewinds_run",
            "CREATE INDEX rewinds_run ON rewinds (at)",
            drop,
            lost_lease(9004),
            "INSERT INTO policy_events (run_id, step, kind, act, target) "
            "VALUES (9001, 1, 'refusal', 'write', 'x')",
            f"UPDATE hs_spend_priced_runs SET calls = calls + 1 WHERE run_id = {runs['root']}",
        )
        repaired = store.repair()
        # the orphan, which only a delete would remove, is still there and still named
        assert kinds(repaired.after) == [("orphan", "policy_events", (9001,))]
        assert store.check() == repaired.after
        assert "created index run_events_run on run_events" in repaired.done
        assert "rebuilt index rewinds_run on rewinds" in repaired.done
        assert any("hs_spend_insert" in line for line in repaired.done)
        assert any("leases" in line for line in repaired.done)
        assert any("spend counters" in line for line in repaired.done)
        # the rebuilt trigger counts again, and the recount made the kept answer priced anew
        store.record_provider_call(runs["root"], ProviderCall(2, 0, "prov", "m1", Usage(1, 1, 2)))
        assert store.check().findings == repaired.after.findings
        by_run = {s.key: s.calls for s in store.spend_by_run(PRICES)}
        assert by_run[str(runs["root"])] == 2
    if store.backend.name == "sqlite":
        assert repaired.backup is not None and repaired.backup.exists()
    else:
        assert repaired.backup is None


def test_repair_of_a_healthy_store_changes_no_byte(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    store, _ = populated(str(path))
    store.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with Store.open(path) as again:
        repaired = again.repair()
    assert repaired.done == () and repaired.backup is None and repaired.after.healthy
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


SAMPLED_REVISIONS = [REVISIONS[i] for i in sorted(spread(len(REVISIONS), 8))]
"""The default tier's stops along the chain (the slow tier stops at every revision)."""


@pytest.mark.parametrize(
    "stops",
    [SAMPLED_REVISIONS, pytest.param(REVISIONS, marks=pytest.mark.slow)],
    ids=["sampled", "every"],
)
@pytest.mark.slow_on("postgresql")
def test_every_chain_revision_is_healthy_and_names_planted_orphans(
    store_target: str, stops: list[str]
) -> None:
    """A store grown along the chain, stopping at each revision of `stops`: at each, nothing
    is found; rows planted with foreign keys off (SQLite) or into tables without one (both)
    are named exactly, then taken out again before the next stop."""
    from harness_store.cli.reader import open_reader

    engine = create_engine(to_url(store_target))
    sqlite = engine.dialect.name == "sqlite"
    try:
        for revision in stops:
            migrate.upgrade(store_target, revision, backup=False)
            with open_reader(store_target, require_readable=False) as reader:
                report = reader.store.check()
            assert report.findings == (), revision
            assert report.revision == revision
            at = REVISIONS.index(revision)
            planted, expected, undo = [], [], []
            if sqlite:
                planted.append(
                    "INSERT INTO steps (run_id, step, decision, result) VALUES (77, 1, 'a', 'b')"
                )
                expected.append(("orphan", "steps", (77,)))
                undo.append("DELETE FROM steps WHERE run_id = 77")
            if at >= REVISIONS.index("0.4"):
                planted.append(
                    "INSERT INTO policy_events (run_id, step, kind, act, target) "
                    "VALUES (78, 1, 'refusal', 'write', 'x')"
                )
                expected.append(("orphan", "policy_events", (78,)))
                undo.append("DELETE FROM policy_events WHERE run_id = 78")
            with engine.begin() as conn:
                if sqlite:
                    conn.exec_driver_sql("PRAGMA foreign_keys = OFF")
                for statement in planted:
                    conn.exec_driver_sql(statement)
            with open_reader(store_target, require_readable=False) as reader:
                report = reader.store.check()
            assert kinds(report) == sorted(expected), revision
            with engine.begin() as conn:
                for statement in undo:
                    conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


def test_a_stamp_above_the_shape_is_one_finding_naming_the_shapes_revision(
    store_target: str,
) -> None:
    from harness_store.cli.reader import open_reader

    migrate.upgrade(store_target, "0.30", backup=False)
    engine = create_engine(to_url(store_target))
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = 'hs3'")
    engine.dispose()
    with open_reader(store_target, require_readable=False) as reader:
        report = reader.store.check()
    assert kinds(report) == [("stamp", "alembic_version", ("hs3",))]
    assert report.findings[0].command == "alembic -x db=DB stamp 0.30"
    assert report.release == "0.30"


@pytest.mark.slow_on("postgresql")
def test_a_stamp_below_the_shape_names_the_revision_it_is_at(store_target: str) -> None:
    report = checked_after(store_target, "UPDATE alembic_version SET version_num = '0.22'")
    assert kinds(report) == [("stamp", "alembic_version", ("0.22",))]
    assert report.findings[0].command == f"alembic -x db=DB stamp {HEAD}"


def test_damage_planted_into_an_upgraded_real_store(tmp_path: Path) -> None:
    path = copy_fixture("io-harness-0.29.0/interrupted", tmp_path)
    with Store.open(path, backup=False) as store:
        root = 1
        plant(
            store,
            "DROP INDEX run_outcomes_finished",
            "UPDATE alembic_version SET version_num = 'hs3'",
            f"INSERT INTO steps (run_id, step, decision, result) VALUES ({root}, 2, 'a', 'b')",
            "INSERT INTO context_events (run_id, step, kind) VALUES (4242, 1, 'assembled')",
        )
        report = store.check()
    assert kinds(report) == [
        ("missing_index", "run_outcomes", ("run_outcomes_finished",)),
        ("orphan", "context_events", (4242,)),
        ("step_without_checkpoint", "steps", (2,)),
    ]
