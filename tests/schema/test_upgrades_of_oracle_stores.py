"""The chain on stores written by io-harness's own code for every release after 0.13.

Each store comes from an oracle (upstream's real `state.rs` of that tag, compiled): fresh (the
release's open on an empty file), walked (every release's open in turn from 0.1), torn (a
walked store of the release before, then a prefix of the release's statements, as an open
killed part-way leaves it), and the real 0.22/0.29 stores upstream commits as fixtures. For
each: detected as its release, stamped there, upgraded to head with no existing row, column
or index altered, the release's own code reading it as before, and downgraded back to the
release with its rows and shape as they were.

The oracles come from `interop.oracles` (built once into its cache, or `$HS_ORACLE_BIN`);
without cargo these tests skip locally and say how to enable them, and in CI they fail.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, SHARED
from interop import oracles
from sqlalchemy import create_engine, inspect, text
from support import legacy
from support.shared import fixture_missing
from support.sqlite_files import connect, diagnose_file
from support.tiers import sampled

from harness_store.releases import (
    HEAD,
    INDEXES,
    RELEASE_NAMES,
    SHAPES,
    STORE_RELEASE,
    UPSTREAM_HEAD,
    release,
    revision_for,
)
from harness_store.schema import migrate
from harness_store.schema.detect import StoreKind

REPO = Path(__file__).resolve().parents[2]
ALEMBIC = [sys.executable, "-m", "alembic", "-c", str(REPO / "alembic.ini")]

MODERN: tuple[str, ...] = RELEASE_NAMES[RELEASE_NAMES.index(STORE_RELEASE) + 1 :]
"""The schema-changing releases after 0.13."""
WITH_ORACLE: tuple[str, ...] = tuple(sorted({*MODERN, "0.29", "0.66"}, key=lambda r: int(r[2:])))
"""Every release after 0.13 an oracle is built for (0.29 and 0.66 changed no schema)."""
WALK: tuple[str, ...] = (*legacy.RELEASES, *WITH_ORACLE)
"""Every oracle release, oldest first: a walked store is opened by each in turn."""
OLD_TABLES = frozenset(SHAPES[STORE_RELEASE])
SHARED_FIXTURES = next(
    (p for p in (FIXTURES, Path("/work/shared/fixtures")) if p.is_dir()), FIXTURES
)


def oracle(name: str) -> Path:
    """The binary of one release's oracle, or skip."""
    return oracles.binary(SHARED / "oracle", name)


def run_oracle(name: str, command: str, path: Path) -> str:
    """Run `oracle-X command path` and return its output; a failure fails the test."""
    done = subprocess.run(
        [str(oracle(name)), command, str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"oracle {name} {command}: {done.stderr}"
    return done.stdout


def shape(path: Path) -> dict[str, Any]:
    """Tables with `PRAGMA table_info`, and upstream's indexes by structure (no `hs_`)."""
    conn = connect(path)
    try:
        indexes = {}
        for (
            name,
            table,
        ) in conn.execute(
            "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' "
            "AND name NOT LIKE 'hs\\_%' ESCAPE '\\' AND tbl_name != 'alembic_version'"
        ):
            columns = [r[2] for r in conn.execute(f'PRAGMA index_info("{name}")')]
            flags = [r for r in conn.execute(f'PRAGMA index_list("{table}")') if r[1] == name]
            indexes[name] = (table, columns, flags[0][2], flags[0][4])
        return {"tables": legacy.table_shapes(conn), "indexes": indexes}
    finally:
        conn.close()


def objects(path: Path) -> set[tuple[str, str, str, str | None]]:
    """Every schema object as `sqlite_master` holds it (exact CREATE text), less ours."""
    conn = connect(path)
    try:
        rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    finally:
        conn.close()
    return {r for r in rows if not r[1].startswith("hs_") and r[2] != "alembic_version"}


def rootpages(path: Path) -> dict[str, int]:
    conn = connect(path)
    try:
        return dict(conn.execute("SELECT name, rootpage FROM sqlite_master WHERE rootpage > 0"))
    finally:
        conn.close()


def assert_kept(path: Path, before: dict[str, Any], before_objects: set[Any]) -> None:
    """Nothing that was there changed: every index's definition, every table's columns (new
    ones may follow them), and every table's and index's root page (nothing rewritten)."""
    after = shape(path)
    for table, columns in before["tables"].items():
        assert after["tables"][table][: len(columns)] == columns, table
    assert {o for o in before_objects if o[0] == "index"} <= objects(path)
    assert before["rootpages"].items() <= rootpages(path).items()


def write_rows(path: Path, seed: int) -> None:
    """0.13's rows as 0.13 writes them, and two rows in every later table the store has."""
    conn = connect(path)
    try:
        legacy.write_rows(conn, STORE_RELEASE, seed)
        for table in legacy.user_tables(conn):
            if table in OLD_TABLES:
                continue
            info = list(conn.execute(f'PRAGMA table_info("{table}")'))
            keys = [r for r in info if r[5]]
            for i in (1, 2):
                names, values = [], []
                for _, name, kind, _notnull, _default, pk in info:
                    if pk and len(keys) == 1 and kind == "INTEGER":
                        continue  # the rowid: let SQLite number it
                    names.append(f'"{name}"')
                    values.append(seed * 10 + i if kind == "INTEGER" else f"{name} {i} ünï 'q'")
                marks = ", ".join("?" * len(values))
                conn.execute(f'INSERT INTO "{table}" ({", ".join(names)}) VALUES ({marks})', values)
    finally:
        conn.close()


def build_fresh(path: Path, name: str) -> None:
    run_oracle(name, "open", path)


def build_walked(path: Path, name: str) -> None:
    for step in WALK[: WALK.index(name) + 1]:
        run_oracle(step, "open", path)


@pytest.fixture(scope="module")
def head_shape(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("head") / "fresh.sqlite3"
    migrate.upgrade(path)
    return shape(path)


@pytest.fixture(scope="module")
def fresh_shapes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The shape each oracle's open gives an empty file (0.13 from the legacy builder)."""
    oracle("0.66")
    folder = tmp_path_factory.mktemp("fresh")
    shapes = {}
    for name in WITH_ORACLE:
        build_fresh(folder / f"{name}.sqlite3", name)
        shapes[name] = shape(folder / f"{name}.sqlite3")
    legacy.build_born_at(folder / "0.13.sqlite3", STORE_RELEASE)
    shapes[STORE_RELEASE] = shape(folder / "0.13.sqlite3")
    return shapes


def round_trip(path: Path, name: str, head_shape: dict[str, Any]) -> None:
    """Upgrade a store release `name` wrote to head and back, checking every promise."""
    at = revision_for(name)
    before_objects = objects(path)
    before_shape = shape(path)
    kept = {**before_shape, "rootpages": rootpages(path)}
    conn = connect(path)
    columns = legacy.column_names(conn)
    before_rows = legacy.dump(conn, typed=True)
    conn.close()
    before_dump = run_oracle(name, "dump", path)

    found = diagnose_file(path)
    assert (found.kind, found.release, found.torn_of) == (StoreKind.UPSTREAM, at, None)
    report = migrate.upgrade(path)
    assert (report.stamped, report.after) == (at, HEAD)

    assert_kept(path, kept, before_objects)
    conn = connect(path)
    try:
        assert legacy.dump(conn, columns, typed=True) == before_rows
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 7
    finally:
        conn.close()
    assert shape(path) == head_shape
    assert run_oracle(name, "dump", path) == before_dump

    migrate.downgrade(path, name, backup=False)
    conn = connect(path)
    try:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(at,)]
        assert legacy.dump(conn, typed=True) == before_rows
    finally:
        conn.close()
    assert shape(path) == before_shape
    assert objects(path) == before_objects
    assert run_oracle(name, "dump", path) == before_dump
    run_oracle(name, "open", path)
    assert objects(path) == before_objects


@pytest.mark.parametrize("name", sampled(WITH_ORACLE, keep=4))
def test_fresh_store_of_release_round_trips(
    name: str, tmp_path: Path, head_shape: dict[str, Any]
) -> None:
    path = tmp_path / "runs.sqlite3"
    build_fresh(path, name)
    write_rows(path, seed=1)
    round_trip(path, name, head_shape)


@pytest.mark.parametrize("name", sampled(WITH_ORACLE, keep=4))
def test_walked_store_of_release_matches_fresh_and_round_trips(
    name: str,
    tmp_path: Path,
    head_shape: dict[str, Any],
    fresh_shapes: dict[str, dict[str, Any]],
) -> None:
    path = tmp_path / "runs.sqlite3"
    build_walked(path, name)
    assert shape(path) == fresh_shapes[name]
    write_rows(path, seed=2)
    round_trip(path, name, head_shape)


@pytest.mark.parametrize("name", sampled(WITH_ORACLE, keep=4))
def test_upgrade_to_a_release_gives_its_shape(
    name: str, tmp_path: Path, fresh_shapes: dict[str, dict[str, Any]]
) -> None:
    """`upgrade <release>` from nothing gives exactly what that release's open gives."""
    path = tmp_path / "runs.sqlite3"
    migrate.upgrade(path, name)
    assert shape(path) == fresh_shapes[name]
    conn = connect(path)
    try:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (revision_for(name),)
        ]
    finally:
        conn.close()
    run_oracle(name, "open", path)
    assert shape(path) == fresh_shapes[name]


def release_statements(name: str, fresh: Path) -> list[str]:
    """Release `name`'s schema statements as its open runs them on a store of the release
    before: its ALTERs, then its tables and indexes in the order the open creates them."""
    r = release(name)
    conn = connect(fresh)
    try:
        statements = []
        for table, added in r.new_columns.items():
            info = {row[1]: row for row in conn.execute(f'PRAGMA table_info("{table}")')}
            for column in added:
                _, _, kind, notnull, default, _ = info[column]
                statements.append(
                    f"ALTER TABLE {table} ADD COLUMN {column} {kind}"
                    + (" NOT NULL" if notnull else "")
                    + (f" DEFAULT {default}" if default is not None else "")
                )
        wanted = set(r.new_tables) | set(r.new_indexes)
        statements += [
            sql
            for sql, obj in conn.execute("SELECT sql, name FROM sqlite_master ORDER BY rowid")
            if obj in wanted
        ]
        return statements
    finally:
        conn.close()


def _statement_count(name: str) -> int:
    r = release(name)
    return sum(len(c) for c in r.new_columns.values()) + len(r.new_tables) + len(r.new_indexes)


TORN = [
    (name, k)
    for name in MODERN
    for k in sorted({1, _statement_count(name) - 1})
    if _statement_count(name) > 1
]
"""Each release whose open runs several statements, killed after its first and before its
last."""


@pytest.mark.parametrize(("name", "stop_after"), sampled(TORN, keep=4, several=True))
def test_torn_open_of_release_is_recognised_and_round_trips(
    name: str,
    stop_after: int,
    tmp_path: Path,
    head_shape: dict[str, Any],
    fresh_shapes: dict[str, dict[str, Any]],
) -> None:
    previous = RELEASE_NAMES[RELEASE_NAMES.index(name) - 1]
    reference = tmp_path / "fresh.sqlite3"
    build_fresh(reference, name)
    statements = release_statements(name, reference)
    assert len(statements) == _statement_count(name)
    path = tmp_path / "runs.sqlite3"
    if previous == STORE_RELEASE:
        legacy.build_lineage(path, STORE_RELEASE, seed=3)
    else:
        build_walked(path, previous)
        write_rows(path, seed=3)
    conn = connect(path)
    for sql in statements[:stop_after]:
        conn.execute(sql)
    conn.close()

    found = diagnose_file(path)
    assert (found.release, found.torn_of) == (previous, name)
    assert f"torn open of {name}" in found.describe()
    before, before_objects = {**shape(path), "rootpages": rootpages(path)}, objects(path)
    report = migrate.upgrade(path)
    assert (report.stamped, report.after) == (previous, HEAD)
    assert_kept(path, before, before_objects)
    assert shape(path) == head_shape
    migrate.downgrade(path, previous, backup=False)
    assert shape(path) == fresh_shapes[previous]
    if previous != STORE_RELEASE:
        run_oracle(previous, "dump", path)


def test_torn_open_of_a_much_newer_release_names_every_partial_release(tmp_path: Path) -> None:
    """0.66's open creates 0.30's memory columns and recalls before 0.18's tables: killed
    there, a 0.13 store holds part of 0.30 and nothing of 0.18."""
    path = tmp_path / "runs.sqlite3"
    legacy.build_lineage(path, STORE_RELEASE, seed=4)
    reference = tmp_path / "fresh.sqlite3"
    build_fresh(reference, "0.66")
    conn = connect(path)
    conn.execute("ALTER TABLE memory ADD COLUMN kind TEXT")
    conn.execute("ALTER TABLE memory ADD COLUMN pinned INTEGER")
    sql = (
        connect(reference)
        .execute("SELECT sql FROM sqlite_master WHERE name = 'memory_recalls'")
        .fetchone()[0]
    )
    conn.execute(sql)
    conn.close()
    found = diagnose_file(path)
    assert (found.release, found.torn_of, found.partial) == (STORE_RELEASE, "0.30", ("0.30",))
    assert "memory.kind" in found.present and "provider_calls" in found.missing
    migrate.upgrade(path)
    assert diagnose_file(path).revision == HEAD


FIXTURE_RELEASES = {
    "io-harness-0.22.0/populated": ("0.22", "0.22"),
    "io-harness-0.22.0/interrupted": ("0.22", "0.22"),
    "io-harness-0.22.0/deferred-approval": ("0.22", "0.22"),
    "io-harness-0.29.0/aggregates": ("0.29", "0.28"),
    "io-harness-0.29.0/interrupted": ("0.29", "0.28"),
}


@pytest.mark.parametrize("fixture", sorted(FIXTURE_RELEASES))
def test_real_upstream_store_is_detected_at_its_release_and_round_trips(
    fixture: str, tmp_path: Path, head_shape: dict[str, Any]
) -> None:
    source = SHARED_FIXTURES / f"{fixture}.sqlite3"
    if not source.exists():
        fixture_missing(source)
    name, at = FIXTURE_RELEASES[fixture]
    path = tmp_path / "runs.sqlite3"
    path.write_bytes(source.read_bytes())
    found = diagnose_file(path)
    assert (found.kind, found.release) == (StoreKind.UPSTREAM, at)
    assert found.describe() == f"io-harness {at} store"
    round_trip(path, name, head_shape)


def test_store_newer_than_every_known_release_is_stamped_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    build_fresh(path, "0.66")
    conn = connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS hologram_events (id INTEGER PRIMARY KEY, x TEXT)")
    conn.execute("ALTER TABLE runs ADD COLUMN mood TEXT")
    conn.close()
    before, before_objects = {**shape(path), "rootpages": rootpages(path)}, objects(path)
    found = diagnose_file(path)
    assert found.kind is StoreKind.NEWER and found.revision == UPSTREAM_HEAD
    assert set(found.extra) == {"hologram_events", "runs.mood"}
    assert "newer than 0.66" in found.describe()
    report = migrate.upgrade(path)
    assert (report.stamped, report.after) == (UPSTREAM_HEAD, HEAD)
    assert before_objects <= objects(path)
    assert_kept(path, before, before_objects)


@pytest.mark.parametrize(
    ("name", "lands"), [("0.14", "hs1"), ("0.29", "0.28"), ("0.40", "0.37"), ("0.66", "0.65")]
)
def test_alembic_takes_release_names_without_a_revision(
    name: str, lands: str, tmp_path: Path
) -> None:
    db = tmp_path / "runs.sqlite3"
    run = [*ALEMBIC, "-x", f"db={db}"]
    done = subprocess.run([*run, "upgrade", name], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    conn = connect(db)
    assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(lands,)]
    conn.close()
    subprocess.run([*run, "upgrade", "head"], capture_output=True, check=True)
    done = subprocess.run([*run, "downgrade", name], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    conn = connect(db)
    assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(lands,)]
    conn.close()


def test_release_newer_than_known_is_refused() -> None:
    with pytest.raises(KeyError, match=r"0\.67"):
        revision_for("0.67")


def test_chain_on_postgresql_gives_every_release_its_tables(pg_url: str) -> None:
    """On PostgreSQL each revision gives its release's tables and columns; a release name
    without a revision lands on the one below; clock defaults give upstream's text."""
    engine = create_engine(pg_url)

    def tables() -> dict[str, frozenset[str]]:
        with engine.connect() as conn:
            inspector = inspect(conn)
            return {
                t: frozenset(c["name"] for c in inspector.get_columns(t))
                for t in inspector.get_table_names()
                if t not in ("alembic_version", "harness_user_version")
            }

    def indexes() -> set[str]:
        with engine.connect() as conn:
            inspector = inspect(conn)
            return {
                str(i["name"])
                for t in inspector.get_table_names()
                for i in inspector.get_indexes(t)
            }

    try:
        for name in ("0.22", "0.40", "0.66"):
            migrate.upgrade(pg_url, name, backup=False)
            at = revision_for(name)
            assert tables() == dict(SHAPES[at])
            assert set(INDEXES[at]) <= indexes()
        assert "hs_sandbox_events_run_id" not in indexes()
        migrate.downgrade(pg_url, "0.29", backup=False)
        assert tables() == dict(SHAPES["0.28"])
        assert "hs_sandbox_events_run_id" in indexes()
        migrate.upgrade(pg_url, backup=False)
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO sessions (root) VALUES ('/r')"))
            conn.execute(
                text(
                    "INSERT INTO edits (run_id, step, tool, path, lines_added, lines_removed) "
                    "VALUES (1, 1, 'write', 'a', 1, 0)"
                )
            )
            stamp = conn.execute(text("SELECT created_at FROM sessions")).scalar_one()
            at = conn.execute(text("SELECT at FROM edits")).scalar_one()
        assert len(stamp) == 24 and stamp[10] == "T" and stamp.endswith("Z")
        assert len(at) == 19 and at[10] == " "
    finally:
        engine.dispose()
