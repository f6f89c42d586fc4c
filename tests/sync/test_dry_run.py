"""`sync(dry_run=True)` and `harness-store sync --dry-run` write nothing anywhere, on both
backends, whatever the destination is (missing or empty, below head, a centre synced before),
and say what a sync would send: the same counts the sync then makes, and what it would first
do to the destination (create it, upgrade it)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text
from support.clirun import run_in_process
from support.synccheck import write_source

from harness_store import Store
from harness_store.errors import StoreNotFoundError
from harness_store.releases import HEAD
from harness_store.schema import migrate
from harness_store.sync import SyncReport, sync


def destination_state(target: str) -> object:
    """Everything a write could change, read without the package: a SQLite file's bytes and
    every file beside it (side files, a backup); a PostgreSQL database's tables with their
    row counts and its sequences."""
    if "://" not in target:
        path = Path(target)
        beside = sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name))
        data = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None
        return beside, data
    engine = create_engine(target)
    try:
        with engine.connect() as conn:
            names = sorted(inspect(conn).get_table_names())
            counts = {
                n: conn.execute(text(f'SELECT count(*) FROM "{n}"')).scalar_one() for n in names
            }
            sequences = (
                conn.execute(text("SELECT sequencename FROM pg_sequences ORDER BY 1"))
                .scalars()
                .all()
            )
            return counts, sequences
    finally:
        engine.dispose()


def same_counts(dry: SyncReport, real: SyncReport) -> None:
    """The dry run said exactly what the sync then did, origin by origin."""
    assert [o.counts for o in dry.origins] == [o.counts for o in real.origins]
    assert [o.new_origin for o in dry.origins] == [o.new_origin for o in real.origins]
    assert dry.rows == real.rows > 0


def test_a_dry_run_into_a_missing_or_empty_store_creates_nothing(
    store_target: str, tmp_path: Path
) -> None:
    """A SQLite file that does not exist stays absent (no side file either); an empty
    PostgreSQL database stays without a table."""
    a, b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    write_source(a, runs=2, tag="a")
    write_source(b, runs=1, tag="b")
    before = destination_state(store_target)
    dry = sync([a, b], store_target, dry_run=True)
    assert destination_state(store_target) == before
    assert dry.dry_run and dry.dest_setup is not None and "create" in dry.dest_setup
    assert any("create" in line for line in dry.describe())
    real = sync([a, b], store_target)
    same_counts(dry, real)
    assert real.dest_setup is None


def test_a_dry_run_into_a_centre_below_head_upgrades_nothing(
    store_target: str, tmp_path: Path
) -> None:
    """A centre at 0.37 is neither upgraded nor backed up; the dry run says it would be."""
    with Store.open(store_target) as centre:
        centre.start_run("the centre's own run", "/c.rs")
    migrate.downgrade(store_target, "0.37", backup=False)
    src = tmp_path / "src.sqlite3"
    write_source(src, runs=2)
    before = destination_state(store_target)
    dry = sync([src], store_target, dry_run=True)
    assert destination_state(store_target) == before
    assert dry.dest_setup is not None and "0.37" in dry.dest_setup and HEAD in dry.dest_setup
    same_counts(dry, sync([src], store_target))


def test_a_dry_run_into_a_synced_centre_changes_nothing(store_target: str, tmp_path: Path) -> None:
    """The usual case, a centre at head synced before: nothing of the new rows, origins, id
    maps or marks stays."""
    a, b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    write_source(a, runs=1, tag="a")
    sync([a], store_target)
    write_source(a, runs=1, tag="more")
    write_source(b, runs=1, tag="b")
    before = destination_state(store_target)
    dry = sync([a, b], store_target, dry_run=True)
    assert destination_state(store_target) == before
    assert dry.dest_setup is None
    assert [o.new_origin for o in dry.origins] == [False, True]
    same_counts(dry, sync([a, b], store_target))


def test_the_command_says_what_it_would_do_and_writes_nothing(
    store_target: str, tmp_path: Path
) -> None:
    src = tmp_path / "src.sqlite3"
    write_source(src, runs=1)
    before = destination_state(store_target)
    text_done = run_in_process("sync", src, store_target, "--dry-run")
    json_done = run_in_process("sync", src, store_target, "--dry-run", "--json")
    assert (text_done.returncode, json_done.returncode) == (0, 0), text_done.stderr
    assert destination_state(store_target) == before
    assert "nothing written" in text_done.stdout and "create" in text_done.stdout
    said = json.loads(json_done.stdout)
    assert said["dry_run"] is True and "create" in said["dest_setup"] and said["rows"] > 0


@pytest.mark.parametrize("follow", [False, True])
def test_every_dry_run_of_the_command_leaves_the_destination_alone(
    tmp_path: Path, follow: bool
) -> None:
    """`--dry-run` with `--follow` is refused before anything is opened."""
    src, dest = tmp_path / "src.sqlite3", tmp_path / "dest.sqlite3"
    write_source(src, runs=1)
    done = run_in_process("sync", src, dest, "--dry-run", *(["--follow"] if follow else []))
    assert done.returncode == (2 if follow else 0), done.stderr
    assert not dest.exists() and not list(tmp_path.glob("dest.sqlite3*"))


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_destination_in_no_directory_is_refused_alike(tmp_path: Path, dry_run: bool) -> None:
    """A dry run does not say it would create what a sync cannot."""
    src = tmp_path / "src.sqlite3"
    write_source(src, runs=1)
    with pytest.raises(StoreNotFoundError, match="no directory"):
        sync([src], tmp_path / "missing" / "centre.sqlite3", dry_run=dry_run)
    assert not (tmp_path / "missing").exists()
