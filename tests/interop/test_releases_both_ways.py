"""Every old release both ways, with its own Store code: a store it wrote survives
`alembic upgrade head` byte-identical to its own reader and stays writable and resumable by it;
a 0.13 store `alembic downgrade`d to it is a store it opens, reads, writes and resumes. And
oracle processes and harness_store processes write one WAL file at once without losing a row."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from harness_store import Store

from . import pywriter
from .hsdump import differences, harness_dump, project, refusals
from .oracles import Oracles
from .releases import HEAD_RELEASE, OLD, OracleRelease, ids

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


@pytest.mark.parametrize("release", OLD, ids=ids(OLD))
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


@pytest.mark.parametrize("release", OLD, ids=ids(OLD))
def test_downgrade_gives_a_store_the_release_opens_reads_writes_and_resumes(
    release: OracleRelease, tmp_path: Path, oracles: Oracles
) -> None:
    path = tmp_path / "store.sqlite3"
    oracles.run(HEAD_RELEASE, "write", path)
    alembic(path, "upgrade", "head")
    with Store.open(path, read_only=True) as store:
        at_head = harness_dump(store, release.name)

    alembic(path, "downgrade", release.revision)

    with closing(sqlite3.connect(path)) as conn:
        (version,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    assert version == release.revision
    oracles.run(release, "open", path)
    dump = oracles.dump(release, path)
    check_no_errors(dump)
    # what the release reads of each run is what 0.13 read before the downgrade
    runs = [{"id": r["id"], "steps": r["steps"]} for r in dump["runs"]]
    assert differences(project(at_head["runs"], runs), runs) == []
    assert dump["run_ids"] == at_head["run_ids"]
    assert oracles.json(release, "write", path)["runs"]["root"] == 5
    oracles.json(release, "resume", path)
    after = oracles.dump(release, path)
    check_no_errors(after)
    assert after["run_ids"] == list(range(1, 9))


WRITERS = 2
"""Oracle writers and Store writers started at once (each kind)."""


def test_oracles_and_stores_write_one_wal_file_at_once(tmp_path: Path, oracles: Oracles) -> None:
    path = tmp_path / "shared.sqlite3"
    Store.open(path).close()  # at head, in WAL
    oracle = [str(oracles.folder / HEAD_RELEASE.binary), "write", str(path)]
    python = [sys.executable, str(Path(pywriter.__file__)), str(path)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(WRITERS) for argv in (oracle, python)]  # fmt: skip
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    assert [code for code, _, err in results] == [0] * len(procs), [e for _, _, e in results]

    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    dump = oracles.dump(HEAD_RELEASE, path)
    with Store.open(path, read_only=True) as store:
        assert differences(harness_dump(store), dump) == []
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
