"""One head shape, whatever the path: every store `upgrade head` finishes ends with exactly the
schema a new head store has — tables, columns, primary keys, indexes with their columns and
uniqueness, harness_store's `hs_` indexes included — on SQLite and on PostgreSQL.

The paths: created new (the reference), walked up the chain one revision at a time, taken
down to a release and up again, detected without a stamp (a store as a release's open leaves
it: the legacy builder's for 0.1 … 0.13, a new store taken down to a later release with its
stamp and `hs_` indexes removed), torn by a crash in an open, the real 0.22 and 0.29 stores, and
stores io-harness's own code wrote at each release the oracles build (`write` where the oracle
has it, else `open`). io-harness creates none of the `hs_` indexes, and detection stamps such a
store at its release, above `hs1`: only the chain's revision `hs4` gives it the ones it
never had.

The default tier runs a sample that still shows the property (a release from each stretch of
the chain: before `hs1`, between it and 0.30's drop of one of its indexes, after); `slow`
sweeps every release.
"""

from __future__ import annotations

import subprocess
import sys
from argparse import Namespace
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from interop import oracles
from interop.releases import RELEASES as ORACLE_RELEASES
from interop.releases import OracleRelease
from sqlalchemy import create_engine, text
from support import legacy
from support.pg_databases import PG_ENV, fresh_pg_database
from support.schema_shape import Shape, as_io_harness_leaves, differences, schema_shape
from support.shared import FIXTURE_STORES, SHARED, copy_fixture

from harness_store.engine import to_url
from harness_store.releases import (
    HEAD,
    RELEASE_NAMES,
    REVISIONS,
    STORE_RELEASE,
    UpstreamIndex,
    own_indexes_at,
)
from harness_store.schema import migrate

REPO = Path(__file__).resolve().parents[2]

SAMPLE = ("0.7", "0.13", "0.22", "0.30", "0.65")
"""Releases the default tier takes stores from: one below `hs1`, 0.13 (just below it), one
whose stores lack every `hs1` index, one after 0.30 dropped `hs_sandbox_events_run_id`, and
the newest upstream revision."""

AFTER_STORE_RELEASE = RELEASE_NAMES[RELEASE_NAMES.index(STORE_RELEASE) + 1 :]


def sweep(sample: tuple[str, ...], every: tuple[str, ...]) -> list[object]:
    """`every`, with the ones outside `sample` marked slow."""
    return [r if r in sample else pytest.param(r, marks=pytest.mark.slow) for r in every]


_HEADS: dict[str, Shape] = {}


def head_shape(backend: str) -> Shape:
    """The shape of a new head store on `backend`, made once per process."""
    if backend not in _HEADS:
        if backend == "sqlite":
            import tempfile

            with tempfile.TemporaryDirectory() as folder:
                target = str(Path(folder) / "new.sqlite3")
                migrate.upgrade(target, backup=False)
                _HEADS[backend] = schema_shape(target)
        else:
            import os

            for url in fresh_pg_database(os.environ[PG_ENV]):
                migrate.upgrade(url, backup=False)
                _HEADS[backend] = schema_shape(url)
    return _HEADS[backend]


def backend_of(target: str) -> str:
    return "postgresql" if target.startswith("postgresql") else "sqlite"


def assert_head_shape(target: str) -> None:
    """Upgrade `target` to head, then compare its schema with a new head store's."""
    report = migrate.upgrade(target, backup=False)
    assert report.after == HEAD
    diff = differences(schema_shape(target), head_shape(backend_of(target)))
    assert not diff, "\n".join(diff)


# --- both backends -------------------------------------------------------------------------


@pytest.mark.slow_on("postgresql")
def test_a_new_store_has_every_own_index(store_target: str) -> None:
    """The reference itself: a new store has each `hs_` index of the head."""
    migrate.upgrade(store_target, backup=False)
    names = {n for t in schema_shape(store_target).values() for n in t["indexes"]}
    assert {n for n in names if n.startswith("hs_")} >= {
        "hs_runs_parent_run_id",
        "hs_spawns_parent_run_id_step",
        "hs_steps_run_id_step_id_tokens",
        "hs_provider_calls_at",
    }


def own_indexes(target: str) -> dict[str, UpstreamIndex]:
    """The store's `hs_` indexes, as facts."""
    return {
        name: UpstreamIndex(table, columns, unique, dict(where).get(f"{backend}_where"))
        for table, facts in schema_shape(target).items()
        for name, (columns, unique, where) in facts["indexes"].items()
        if name.startswith("hs_")
        for backend in (backend_of(target),)
    }


@pytest.mark.slow_on("postgresql")
def test_walked_up_the_chain_one_revision_at_a_time(store_target: str) -> None:
    """At each revision the store holds the `hs_` indexes `own_indexes_at` names (the facts
    `check` compares a store with), and at the end a new head store's schema."""
    for revision in REVISIONS[:-1]:
        migrate.upgrade(store_target, revision, backup=False)
        assert own_indexes(store_target) == own_indexes_at(revision), revision
    assert_head_shape(store_target)
    assert own_indexes(store_target) == own_indexes_at(HEAD)


@pytest.mark.parametrize("release", sweep(SAMPLE, RELEASE_NAMES))
@pytest.mark.slow_on("postgresql")
def test_taken_down_to_a_release_and_up_again(store_target: str, release: str) -> None:
    migrate.upgrade(store_target, backup=False)
    migrate.downgrade(store_target, release, backup=False)
    assert_head_shape(store_target)


# --- SQLite: what io-harness itself leaves -------------------------------------------------


@pytest.mark.parametrize("release", sweep(SAMPLE, AFTER_STORE_RELEASE))
def test_detected_without_a_stamp_at_a_later_release(tmp_path: Path, release: str) -> None:
    """A store with a release's shape and nothing of harness_store's (no stamp, no `hs_`
    index), as io-harness's open of that release leaves it, is detected, stamped there and
    upgraded. (SQLite only: io-harness writes no PostgreSQL store, and detection finds none
    there without a stamp.)"""
    target = str(tmp_path / "runs.sqlite3")
    migrate.upgrade(target, backup=False)
    as_io_harness_leaves(target, release)
    assert_head_shape(target)


@pytest.mark.parametrize("release", sweep(SAMPLE, legacy.RELEASES))
def test_born_at_an_early_release(tmp_path: Path, release: str) -> None:
    path = tmp_path / "runs.sqlite3"
    legacy.build_born_at(path, release)
    assert_head_shape(str(path))


@pytest.mark.parametrize(
    ("release", "stop_after"),
    [
        (r, k) if r in SAMPLE else pytest.param(r, k, marks=pytest.mark.slow)
        for r in legacy.RELEASES
        for k in legacy.torn_points(r)
    ],
)
def test_torn_by_a_crash_in_an_early_open(tmp_path: Path, release: str, stop_after: int) -> None:
    path = tmp_path / "runs.sqlite3"
    legacy.build_torn(path, release, stop_after)
    assert_head_shape(str(path))


@pytest.mark.parametrize("name", FIXTURE_STORES)
def test_real_fixture_store(tmp_path: Path, name: str) -> None:
    assert_head_shape(str(copy_fixture(name, tmp_path)))


ORACLE_SAMPLE = ("0.13", "0.22", "0.29", "0.66")
"""The oracle-written stores of the default tier: 0.13's `write` (the rich store), two releases
whose stores lack every `hs1` index, and 0.66's `write` (the newest)."""


def oracle_store(path: Path, release: OracleRelease) -> Path:
    """A store io-harness's own code of `release` wrote: its `write` where the oracle has one,
    else its `open` on a new file."""
    folder = oracles.built_oracles(SHARED / "oracle")
    folder.run(release, "write" if release.writes else "open", path)
    return path


@pytest.fixture
def oracle_path(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "runs.sqlite3"


@pytest.mark.parametrize(
    "release",
    [
        r if r.name in ORACLE_SAMPLE else pytest.param(r, marks=pytest.mark.slow)
        for r in ORACLE_RELEASES
    ],
    ids=str,
)
def test_written_by_io_harness_at_a_release(oracle_path: Path, release: OracleRelease) -> None:
    assert_head_shape(str(oracle_store(oracle_path, release)))


# --- `alembic check` on what users upgrade -------------------------------------------------


def alembic_check(path: Path) -> None:
    """`alembic -x db=PATH check` through Alembic's API with the repository's `alembic.ini`."""
    config = Config(str(REPO / "alembic.ini"), cmd_opts=Namespace(x=[f"db={path}"]))
    command.check(config)


@pytest.mark.parametrize("name", FIXTURE_STORES)
def test_alembic_check_passes_on_an_upgraded_real_fixture(tmp_path: Path, name: str) -> None:
    path = copy_fixture(name, tmp_path)
    migrate.upgrade(path, backup=False)
    alembic_check(path)


@pytest.mark.parametrize(
    "release",
    [
        r if r.name in ORACLE_SAMPLE else pytest.param(r, marks=pytest.mark.slow)
        for r in ORACLE_RELEASES
    ],
    ids=str,
)
def test_alembic_check_passes_on_an_upgraded_store_io_harness_wrote(
    oracle_path: Path, release: OracleRelease
) -> None:
    path = oracle_store(oracle_path, release)
    migrate.upgrade(path, backup=False)
    alembic_check(path)


def alembic_check_command(target: str) -> subprocess.CompletedProcess[str]:
    """The real `alembic -c alembic.ini -x db=TARGET check`, whose ini logs Alembic at INFO."""
    alembic = Path(sys.executable).with_name("alembic")
    argv = [str(alembic), "-c", str(REPO / "alembic.ini"), "-x", f"db={target}", "check"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_alembic_check_is_quiet_on_a_clean_store(store_target: str) -> None:
    """On PostgreSQL a clean store's check first printed a "Detected NULL on column" line for
    every primary key (the models keep upstream's SQLite shape, where a key carries no NOT
    NULL) and a "Detected sequence" line for every SERIAL key: intended, and noise. A clean
    check says only that nothing was detected, on both backends."""
    migrate.upgrade(store_target, backup=False)
    done = alembic_check_command(store_target)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == "No new upgrade operations detected.\n"
    assert "Detected" not in done.stderr, done.stderr


def test_alembic_check_still_fails_on_a_real_difference(store_target: str) -> None:
    """What the quiet check leaves out is the intended differences only: a column the
    models lack, or a key column that lost its NOT NULL on PostgreSQL, still fails it."""
    migrate.upgrade(store_target, backup=False)
    engine = create_engine(to_url(store_target))
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE runs ADD COLUMN rogue TEXT"))
    done = alembic_check_command(store_target)
    assert done.returncode == 255, done.stdout + done.stderr
    assert "FAILED: New upgrade operations detected" in done.stdout, done.stdout
    assert "rogue" in done.stdout, done.stdout
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE runs DROP COLUMN rogue"))
            conn.execute(text("ALTER TABLE run_leases DROP CONSTRAINT run_leases_pkey"))
            conn.execute(text("ALTER TABLE run_leases ALTER COLUMN run_id DROP NOT NULL"))
        done = alembic_check_command(store_target)
        assert done.returncode == 255, done.stdout + done.stderr
        assert "run_leases" in done.stdout, done.stdout
    engine.dispose()
