"""Offline (`--sql`) scripts applied to the stores people have, compared with an online upgrade.

A script is applied as a person applies it — `sqlite3 -bail FILE < script`, `psql -v
ON_ERROR_STOP=1` — to a copy of a store, and another copy is upgraded online; the two must
end with the same schema (tables, columns, keys, indexes, triggers), the same rows, the same
revision and, on SQLite, in WAL. The stores: the real 0.22/0.29 fixture stores, stores written
by io-harness's own code (the oracles), a pre-0.12 store in `delete` mode, and on PostgreSQL a
database at an older revision, tracked or left as an io-harness release leaves it.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from conftest import SHARED
from interop import oracles
from interop.releases import RELEASES
from sqlalchemy import create_engine, text
from support import legacy
from support.pg_databases import fresh_pg_database
from support.provided import unavailable
from support.schema_shape import as_io_harness_leaves, differences, schema_shape
from support.shared import copy_fixture
from support.sqlite_files import connect, diagnose_file

from harness_store.errors import ForeignDatabaseError, OfflineUpgradeError
from harness_store.releases import HEAD, revision_for
from harness_store.schema import migrate
from harness_store.schema.detect import StoreKind

REPO = Path(__file__).resolve().parents[2]
ALEMBIC = [sys.executable, "-m", "alembic", "-c", str(REPO / "alembic.ini")]


def sqlite3_cli() -> str:
    found = shutil.which("sqlite3")
    if found is None:
        unavailable("the sqlite3 command-line shell is not installed")
    return found


def render(target: str | Path, *commands: tuple[str, str]) -> str:
    """The script Alembic prints for each `(command, revision)` in `--sql` mode, in turn."""
    out = io.StringIO()
    config = migrate.alembic_config(str(target))
    config.output_buffer = out
    for name, revision in commands:
        getattr(command, name)(config, revision, sql=True)
    return out.getvalue()


def apply_sqlite(path: Path, script: str) -> None:
    """Apply `script` with the sqlite3 shell, stopping at the first error as `-bail` does."""
    done = subprocess.run([sqlite3_cli(), "-bail", str(path)], input=script, text=True,
                          capture_output=True, check=False)  # fmt: skip
    assert done.returncode == 0 and not done.stderr, done.stderr


def sqlite_facts(path: Path) -> dict[str, Any]:
    """Everything an upgrade decides: each object's CREATE text (triggers too; its spacing
    aside, as Alembic prints a tab as four spaces), every row, the revision, `user_version`
    and the journal mode."""
    conn = connect(path)
    try:
        objects = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")
        return {
            "objects": sorted((*o[:3], " ".join((o[3] or "").split())) for o in objects),
            "rows": legacy.dump(conn, typed=True),
            "revision": conn.execute("SELECT version_num FROM alembic_version").fetchall(),
            "user_version": conn.execute("PRAGMA user_version").fetchone()[0],
            "journal": conn.execute("PRAGMA journal_mode").fetchone()[0],
        }
    finally:
        conn.close()


def assert_offline_matches_online(store: Path, tmp_path: Path) -> str:
    """Render `alembic -x db=STORE upgrade head --sql`, apply it to the store, upgrade a copy
    of the store as it was online, and compare the two; the script."""
    online = tmp_path / "online.sqlite3"
    shutil.copyfile(store, online)
    before = store.read_bytes()
    script = render(store, ("upgrade", "head"))
    assert store.read_bytes() == before, "rendering the script changed the store"
    apply_sqlite(store, script)
    migrate.upgrade(online, backup=False)
    assert not differences(schema_shape(str(store)), schema_shape(str(online)))
    got, want = sqlite_facts(store), sqlite_facts(online)
    assert got == want
    assert got["revision"] == [(HEAD,)] and got["journal"] == "wal"
    found = diagnose_file(store)
    assert (found.kind, found.revision) == (StoreKind.TRACKED, HEAD)
    return script


@pytest.mark.parametrize("fixture", ["io-harness-0.22.0/populated", "io-harness-0.29.0/aggregates"])
def test_script_upgrades_a_real_store_from_its_release(fixture: str, tmp_path: Path) -> None:
    """The 0.22 and 0.29 stores io-harness itself wrote: the script starts at the release the
    store is detected at (stamping it), and applies whole."""
    store = copy_fixture(fixture, tmp_path)
    script = assert_offline_matches_online(store, tmp_path)
    assert "CREATE TABLE runs" not in script  # not a script from base


def test_the_alembic_command_renders_the_script_for_the_store_it_names(tmp_path: Path) -> None:
    """`alembic -x db=old.sqlite3 upgrade head --sql`, as the guide says, read by `sqlite3`."""
    store = copy_fixture("io-harness-0.22.0/populated", tmp_path)
    online = tmp_path / "online.sqlite3"
    shutil.copyfile(store, online)
    done = subprocess.run([*ALEMBIC, "-x", f"db={store}", "upgrade", "head", "--sql"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"INSERT INTO alembic_version (version_num) VALUES ('{revision_for('0.22')}')" in (
        done.stdout
    )
    apply_sqlite(store, done.stdout)
    migrate.upgrade(online, backup=False)
    assert sqlite_facts(store) == sqlite_facts(online)


def test_stamp_then_upgrade_from_the_release_applies(tmp_path: Path) -> None:
    """The two-command recipe (`stamp 0.22 --sql`, then `upgrade 0.22:head --sql`) applies to
    the 0.22 store, whatever `hs_` indexes it lacks."""
    store = copy_fixture("io-harness-0.22.0/populated", tmp_path)
    online = tmp_path / "online.sqlite3"
    shutil.copyfile(store, online)
    script = render(store, ("stamp", "0.22"), ("upgrade", "0.22:head"))
    apply_sqlite(store, script)
    migrate.upgrade(online, backup=False)
    assert sqlite_facts(store) == sqlite_facts(online)


ORACLE_RELEASES = ("0.5", "0.13", "0.18", "0.66")
"""Stores of a release below the WAL switch (0.5), of the last one `hs1` follows (0.13), of
the first one stamped above `hs1` (0.18) and of the newest (0.66, stamped at upstream's head)."""


@pytest.mark.parametrize("name", ORACLE_RELEASES)
def test_script_upgrades_an_oracle_written_store(name: str, tmp_path: Path) -> None:
    """A store io-harness's own code of the release wrote (its `write` where it has one, else
    its `open`)."""
    built = oracles.built_oracles(SHARED / "oracle")
    release = next(r for r in RELEASES if r.name == name)
    store = tmp_path / "runs.sqlite3"
    if release.writes:
        built.written(release, store)
    else:
        built.run(release, "open", store)
    found = diagnose_file(store)
    assert (found.kind, found.revision) == (StoreKind.UPSTREAM, release.revision)
    assert_offline_matches_online(store, tmp_path)


def test_script_upgrades_a_store_newer_than_every_known_release(tmp_path: Path) -> None:
    """A store of an io-harness newer than 0.66 (its open's shape and more) is stamped at
    upstream's head revision, then gets harness_store's own revisions, its own tables and
    columns left as they are."""
    built = oracles.built_oracles(SHARED / "oracle")
    store = tmp_path / "runs.sqlite3"
    built.run(next(r for r in RELEASES if r.name == "0.66"), "open", store)
    conn = connect(store)
    conn.execute("CREATE TABLE hologram_events (id INTEGER PRIMARY KEY, x TEXT)")
    conn.execute("ALTER TABLE runs ADD COLUMN mood TEXT")
    conn.close()
    assert diagnose_file(store).kind is StoreKind.NEWER
    script = assert_offline_matches_online(store, tmp_path)
    assert "hologram_events" not in script and "mood" not in script


def test_script_switches_a_pre_wal_store_to_wal_after_its_commit(tmp_path: Path) -> None:
    """0.12's switch to WAL cannot run in a transaction (SQLite ignores it there): the script
    runs it after COMMIT, and the store applied ends in WAL as an online upgrade leaves it."""
    store = tmp_path / "runs.sqlite3"
    legacy.build_lineage(store, "0.5", seed=1)
    conn = connect(store)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()
    script = assert_offline_matches_online(store, tmp_path)
    commit = script.rindex("COMMIT;")
    assert script.index("PRAGMA journal_mode = WAL") > commit


def test_script_switches_a_store_past_0_12_back_to_wal(tmp_path: Path) -> None:
    """A store past 0.12 whose journal mode was changed back by hand is switched to WAL by an
    online upgrade; its script does the same, after COMMIT."""
    store = tmp_path / "runs.sqlite3"
    legacy.build_lineage(store, "0.13", seed=1)
    conn = connect(store)
    assert conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    conn.close()
    script = assert_offline_matches_online(store, tmp_path)
    assert script.index("PRAGMA journal_mode = WAL") > script.rindex("COMMIT;")


def test_script_from_base_builds_a_store_in_wal(tmp_path: Path) -> None:
    """With no store at the target, the script builds one from base, ending in WAL."""
    script = render(tmp_path / "absent.sqlite3", ("upgrade", "head"))
    assert not (tmp_path / "absent.sqlite3").exists()
    built = tmp_path / "offline.sqlite3"
    apply_sqlite(built, script)
    online = tmp_path / "online.sqlite3"
    migrate.upgrade(online, backup=False)
    assert sqlite_facts(built) == sqlite_facts(online)


def test_a_tracked_store_gets_the_script_from_its_revision(tmp_path: Path) -> None:
    """A store Alembic tracks at 0.22 gets `0.22 → head`, with no stamp."""
    store = tmp_path / "runs.sqlite3"
    migrate.upgrade(store, "0.22", backup=False)
    script = assert_offline_matches_online(store, tmp_path)
    assert "INSERT INTO alembic_version" not in script
    assert f"Running upgrade {revision_for('0.22')} -> " in script


def test_a_torn_store_is_refused_offline(tmp_path: Path) -> None:
    """A store torn between two releases holds part of the next one; no fixed script can tell
    which part, so none is rendered, and the store is left as it was."""
    store = tmp_path / "runs.sqlite3"
    legacy.build_lineage(store, "0.13", seed=1)
    conn = connect(store)
    conn.execute("ALTER TABLE memory ADD COLUMN kind TEXT")  # the first of 0.30's statements
    conn.close()
    assert diagnose_file(store).torn_of == "0.30"
    before = store.read_bytes()
    with pytest.raises(OfflineUpgradeError, match="upgrade it online"):
        render(store, ("upgrade", "head"))
    assert store.read_bytes() == before


def test_a_foreign_database_is_refused_offline_as_online(tmp_path: Path) -> None:
    """A database of another application gets no script, as it gets no upgrade, and is left
    byte for byte as it was."""
    store = tmp_path / "other.sqlite3"
    conn = connect(store)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total INTEGER)")
    conn.close()
    before = store.read_bytes()
    with pytest.raises(ForeignDatabaseError):
        render(store, ("upgrade", "head"))
    assert store.read_bytes() == before


# --- PostgreSQL ----------------------------------------------------------------------------


def psql_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def apply_psql(url: str, script: str) -> None:
    psql = shutil.which("psql")
    if psql is None:
        unavailable("psql is not installed")
    done = subprocess.run([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", psql_url(url)],
                          input=script, text=True, capture_output=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.fixture
def other_pg_url(pg_server_url: str) -> Iterator[str]:
    """A second empty PostgreSQL database, for the online upgrade compared with."""
    yield from fresh_pg_database(pg_server_url)


TRIGGERS = text("SELECT tgname, tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal")
VIEWS = text(
    "SELECT viewname, definition FROM pg_views WHERE schemaname = current_schema() "
    "ORDER BY viewname"
)
FUNCTIONS = text(
    "SELECT proname, provolatile, prosrc FROM pg_proc "
    "WHERE pronamespace = current_schema()::regnamespace ORDER BY proname"
)


def pg_facts(url: str) -> dict[str, Any]:
    """The revision, the triggers, the spend counters' rows, and hs5's views and functions (the
    tables are compared by `schema_shape`)."""

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {
                "revision": conn.execute(text("SELECT version_num FROM alembic_version")).all(),
                "triggers": sorted(conn.execute(TRIGGERS).all()),
                "spend": conn.execute(
                    text("SELECT day, model, changes FROM hs_spend_days ORDER BY day, model")
                ).all(),
                "views": conn.execute(VIEWS).all(),
                "functions": conn.execute(FUNCTIONS).all(),
            }
    finally:
        engine.dispose()


@pytest.mark.parametrize("tracked", [True, False], ids=["tracked", "as-io-harness-leaves"])
def test_postgresql_script_from_an_older_revision_applies(
    tracked: bool, pg_url: str, other_pg_url: str
) -> None:
    """A database at 0.22 — tracked (walked up the chain, `hs_` indexes and all), or with
    0.22's shape and nothing of harness_store's (no stamp, no `hs_` index) and stamped by the
    script — upgraded by `upgrade 0.22:head --sql` through psql, as an online upgrade leaves
    a database at 0.22 (tracked: on PostgreSQL, where io-harness writes no store, detection
    finds no release in an untracked one)."""
    at = revision_for("0.22")
    for url in (pg_url, other_pg_url):
        migrate.upgrade(url, backup=False)
        migrate.downgrade(url, at, backup=False)
    steps = [("upgrade", f"{at}:head")]
    if not tracked:
        as_io_harness_leaves(pg_url, "0.22")
        steps.insert(0, ("stamp", at))
    apply_psql(pg_url, render(pg_url, *steps))
    migrate.upgrade(other_pg_url, backup=False)
    assert not differences(schema_shape(pg_url), schema_shape(other_pg_url))
    assert pg_facts(pg_url) == pg_facts(other_pg_url)
    assert pg_facts(pg_url)["revision"] == [(HEAD,)]
    assert len(pg_facts(pg_url)["views"]) > 20
