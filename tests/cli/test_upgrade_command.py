"""`harness-store upgrade` on the real fixtures and legacy stores: backups, step by step, release
names, torn and read-only stores."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from support import legacy
from support.small_disk import SmallDisk, small_disks

from harness_store.releases import HEAD

from .commandkit import (
    EXIT_USAGE,
    Copy,
    as_json,
    digest,
    fails,
    ok,
)

# --- upgrade -----------------------------------------------------------------------------


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".*.bak"))


@pytest.mark.parametrize("name", ["io-harness-0.22.0/populated", "io-harness-0.29.0/aggregates"])
def test_upgrade_fixture_backs_up_and_reaches_head(fixture_copy: Copy, name: str) -> None:
    path = fixture_copy(name)
    before = as_json("inspect", path)
    out = ok("upgrade", path)
    (backup,) = backups(path)
    release = "0.22" if "0.22.0" in name else "0.28"
    assert f"backup: {backup}" in out and f"stamped at {release}" in out and f"now at {HEAD}" in out
    after = as_json("inspect", path)
    assert after["revision"] == HEAD and after["at_head"] is True
    for table, count in before["tables"].items():
        assert after["tables"][table] == count
    assert set(after["tables"]) - set(before["tables"]) >= {"tool_attempts", "run_leases"}
    kept = as_json("inspect", backup)
    assert kept["revision"] is None and kept["tables"] == before["tables"]
    again = ok("upgrade", path)
    assert f"already at {HEAD}; nothing changed" in again
    assert backups(path) == [backup]
    assert as_json("runs", path) == as_json("runs", backup)


def test_upgrade_legacy_step_by_step(born_05: Path) -> None:
    report = as_json("upgrade", born_05, "--to", "0.9")
    assert (report["before"], report["after"], report["stamped"]) == ("0.5", "0.9", "0.5")
    assert report["backup"] and Path(report["backup"]).exists()
    assert as_json("inspect", born_05)["revision"] == "0.9"
    before = digest(born_05)
    assert "upgrade never goes down" in fails(EXIT_USAGE, "upgrade", born_05, "--to", "0.3")
    assert digest(born_05) == before
    out = ok("upgrade", born_05, "--no-backup")
    assert f"0.9 → {HEAD}" in out and "backup: none (--no-backup)" in out
    assert len(backups(born_05)) == 1
    doc = as_json("inspect", born_05)
    assert (doc["revision"], doc["journal_mode"], doc["user_version"]) == (HEAD, "wal", 7)
    assert as_json("runs", born_05)


def test_upgrade_to_a_release_name_lands_on_its_revision(born_05: Path) -> None:
    """`--to` takes io-harness release names too: 0.40 changed no schema, so it means 0.37."""
    report = as_json("upgrade", born_05, "--to", "0.40", "--no-backup")
    assert (report["before"], report["after"]) == ("0.5", "0.37")
    assert "newer than 0.66" in fails(EXIT_USAGE, "upgrade", born_05, "--to", "0.67")


def test_upgrade_torn_store(torn: Path) -> None:
    out = ok("upgrade", torn)
    assert "torn open of 0.7" in out and f"now at {HEAD}" in out
    assert backups(torn)
    assert as_json("inspect", torn)["revision"] == HEAD


def test_read_only_file_is_read_but_not_upgraded(born_05: Path, born_013: Path) -> None:
    for path in (born_05, born_013):
        path.chmod(0o444)
    assert as_json("runs", born_013)
    before = digest(born_05)
    assert as_json("inspect", born_05)["shape_revision"] == "0.5"
    assert "read-only" in fails(1, "upgrade", born_05, said="found: io-harness 0.5 store")
    assert digest(born_05) == before and backups(born_05) == []


def test_a_read_only_store_already_at_the_head_has_nothing_to_do(tmp_path: Path) -> None:
    """A store at the head on read-only media (here: a file without write permission) was
    refused as read-only, though upgrading it writes nothing: it is "nothing to do", the file
    untouched and nothing written beside it. One that needs work is still refused."""
    from harness_store import Store

    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        store.start_run("kept", "task.md")
    path.chmod(0o444)
    before = digest(path)
    out = ok("upgrade", path)
    assert f"{path}: nothing to do — already at {HEAD}; nothing changed" in out.splitlines()
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.sqlite3"]


def test_through_a_symlink_the_backup_goes_beside_the_real_file(
    tmp_path: Path, born_05: Path
) -> None:
    """Upgraded through a symbolic link, the backup was written beside the link, in a folder
    that may not even be the store's volume; it goes beside the file the link names, where
    the guide's restore looks for it."""
    links = tmp_path / "links"
    links.mkdir()
    link = links / "runs.sqlite3"
    link.symlink_to(born_05)
    out = ok("upgrade", link)
    (backup,) = backups(born_05)
    assert f"backup: {backup}" in out
    assert sorted(p.name for p in links.iterdir()) == ["runs.sqlite3"]
    assert as_json("inspect", born_05)["revision"] == HEAD


# --- a full disk -----------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with small_disks(tmp_path) as make:
        yield make


def grown_0_11(path: Path, steps: int = 30_000) -> Path:
    """An io-harness 0.11 store with one run of `steps` steps: enough rows that the chain's
    new indexes need room of their own."""
    legacy.build_lineage(path, "0.11")
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("BEGIN")
        run = conn.execute("INSERT INTO runs (goal, file) VALUES ('bulk', 'b.txt')").lastrowid
        conn.executemany(
            "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
            "VALUES (?, ?, ?, ?, 'p', '{}', ?)",
            ((run, i, f"decision {i}", "r" * (i % 90), i) for i in range(1, steps + 1)),
        )
        conn.execute("COMMIT")
    return path


@pytest.mark.parametrize("stage", ["backup", "upgrade"])
def test_a_full_disk_is_one_whole_line_and_the_store_unchanged(
    tmp_path: Path, small_disk: SmallDisk, stage: str
) -> None:
    """Room for the store and half a backup, or for a whole backup but not the chain's new
    indexes: either way one line saying the store is unchanged and what to do, exit code 1,
    and nothing beside the store."""
    original = grown_0_11(tmp_path / "original.sqlite3")
    size = original.stat().st_size
    disk = small_disk(size + (size // 2 if stage == "backup" else size + 48 * 1024))
    path = disk / "runs.sqlite3"
    shutil.copyfile(original, path)
    before = digest(path)
    line = fails(1, "upgrade", path, said="found: io-harness 0.11 store\n")
    assert line.startswith(f"harness-store: error: {path}: the upgrade failed while "), line
    assert "the disk is full" in line and "unchanged" in line, line
    if stage == "upgrade":
        assert "Free some space" in line and "SQL" not in line, line
    assert digest(path) == before
    assert sorted(p.name for p in disk.iterdir()) == ["runs.sqlite3"]


def test_a_new_store_on_a_full_disk_is_not_left_behind(small_disk: SmallDisk) -> None:
    """`upgrade` where no store exists creates one; on a full disk it says no store was
    created and leaves no file there (not an empty one a later open would take for a store)."""
    disk = small_disk(64 << 10)
    path = disk / "runs.sqlite3"
    line = fails(1, "upgrade", path, said=f"found: no store at {path}; creating one at {HEAD}\n")
    assert line.startswith(f"harness-store: error: {path}: the disk is full"), line
    assert "no store was created" in line and "backup" not in line, line
    assert list(disk.iterdir()) == []
