"""Every release both ways, with its own Store code, as far as its oracle's CLI goes.

- Up: a store each classic release (0.1 … 0.13, which have `write` and `resume`) wrote survives
  `alembic upgrade head` byte-identical to its own reader and stays writable and resumable by it.
  A store of each release after 0.13 is upgraded to head and downgraded back, its dump
  byte-identical, by tests/schema/test_upgrades_of_oracle_stores.py (`round_trip`, fresh and
  walked stores), which this module does not repeat.
- Down: a head store holding 0.13's rich rows, `alembic downgrade`d to any release below head,
  is read by that release exactly as it read the head store (byte-identical dump, no refusal);
  releases whose oracle has `write`/`resume` then write and resume there.
- Oracle processes and harness_store processes write one WAL file at once without losing a row.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from support.tiers import sampled

from harness_store import Store

from . import pywriter
from .hsdump import differences, harness_dump, project, refusals
from .oracles import Oracles
from .releases import API_RELEASE, BELOW_HEAD, CLASSIC, OracleRelease, ids

REPO = Path(__file__).resolve().parents[2]


def alembic(path: Path, *command: str) -> None:
    """The real `alembic` command on a store file (no backup: the test keeps its own copy)."""
    argv = [sys.executable, "-m", "alembic", "-c", str(REPO / "alembic.ini"),
            "-x", f"db={path}", "-x", "backup=no", *command]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr


def check_no_errors(dump: dict[str, object]) -> None:
    """No getter of the release refused anything in the store."""
    assert refusals(dump) == []


@pytest.mark.parametrize("release", sampled(CLASSIC, keep=4, ids=ids(CLASSIC)))
def test_upgrade_head_keeps_the_release_reading_writing_and_resuming_its_store(
    release: OracleRelease, tmp_path: Path, oracles: Oracles
) -> None:
    path = tmp_path / "store.sqlite3"
    oracles.run(release, "write", path)
    before = oracles.dump_text(release, path)

    alembic(path, "upgrade", "head")

    assert oracles.dump_text(release, path) == before
    transcript = oracles.json(release, "write", path)
    assert transcript["runs"]["root"] == 5
    oracles.json(release, "resume", path)
    dump = oracles.dump(release, path)
    check_no_errors(dump)
    assert dump["run_ids"] == list(range(1, 9))
    with Store.open(path, read_only=True) as store:
        ours = harness_dump(store, release.name)
    assert differences(project(ours, dump), dump) == []


@pytest.fixture(scope="module")
def head_store(tmp_path_factory: pytest.TempPathFactory, oracles: Oracles) -> Path:
    """A store 0.13's own code wrote (every record kind it has), upgraded to head."""
    path = tmp_path_factory.mktemp("head") / "head.sqlite3"
    oracles.run(API_RELEASE, "write", path)
    alembic(path, "upgrade", "head")
    return path


@pytest.mark.parametrize("release", sampled(BELOW_HEAD, keep=4, ids=ids(BELOW_HEAD)))
def test_downgrade_gives_a_store_the_release_opens_reads_writes_and_resumes(
    release: OracleRelease, tmp_path: Path, oracles: Oracles, head_store: Path
) -> None:
    path = tmp_path / "store.sqlite3"
    shutil.copyfile(head_store, path)
    with Store.open(path, read_only=True) as store:
        at_head = harness_dump(store, release.name if release.classic else API_RELEASE.name)
    read_at_head = oracles.dump_text(release, path)

    alembic(path, "downgrade", release.revision)

    with closing(sqlite3.connect(path)) as conn:
        (version,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    assert version == release.revision
    oracles.run(release, "open", path)
    # the release reads the downgraded store exactly as it read the head store
    assert oracles.dump_text(release, path) == read_at_head
    dump = oracles.dump(release, path)
    check_no_errors(dump)
    assert dump["run_ids"] == at_head["run_ids"]
    if release.classic:
        # what the release reads of each run is what harness_store read at head
        runs = [{"id": r["id"], "steps": r["steps"]} for r in dump["runs"]]
        assert differences(project(at_head["runs"], runs), runs) == []
    if release.writes:
        written = oracles.json(release, "write", path)
        if release.classic:
            assert written["runs"]["root"] == 5
        else:  # 0.66's writer reports a transcript of its API calls
            assert written["transcript"]
    if release.resumes:
        oracles.json(release, "resume", path)
        after = oracles.dump(release, path)
        check_no_errors(after)
        assert after["run_ids"] == list(range(1, 9))


WRITERS = 2
"""Oracle writers and Store writers started at once (each kind)."""


def test_oracles_and_stores_write_one_wal_file_at_once(tmp_path: Path, oracles: Oracles) -> None:
    path = tmp_path / "shared.sqlite3"
    Store.open(path).close()  # at head, in WAL
    oracle = [str(oracles.folder / API_RELEASE.binary), "write", str(path)]
    python = [sys.executable, str(Path(pywriter.__file__)), str(path)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(WRITERS) for argv in (oracle, python)]  # fmt: skip
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    assert [code for code, _, err in results] == [0] * len(procs), [e for _, _, e in results]

    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    dump = oracles.dump(API_RELEASE, path)
    with Store.open(path, read_only=True) as store:
        # fields of releases after 0.13 (a spawn's `as_name`) are not 0.13's to read
        assert differences(project(harness_dump(store), dump), dump) == []
    runs = dump["runs"]
    assert len(runs) == 4 * len(procs)
    roots = [r for r in runs if r["steps"] and r["steps"][0]["decision"] == "wrote file"
             and r["depth"] == 0 and r["provider"] == "anthropic"]  # fmt: skip
    assert len(roots) == len(procs)
    # every writer's root run holds all its rows, whichever process wrote it
    assert len({r["canonical_trace"] for r in roots}) == 1
    assert {len(r["steps"]) for r in roots} == {5}
    assert {len(r["events"]) for r in roots} == {4}
    assert {len(r["observations"]) for r in roots} == {10}
    assert sorted(r["run_status"] for r in runs) == sorted(
        ["Completed", "Paused", "Running", "Failed"] * len(procs)
    )
