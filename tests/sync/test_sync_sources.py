"""Sources are only read: on read-only media, leaving no side files, checked for damage first
(a damaged one named and skipped the same way on both destinations, the others synced, a
non-zero exit at the end); two copies of one marked store are refused in one sync and warned
about across syncs."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from support.clirun import run_in_process
from support.sqlite_files import make_hot_journal
from support.synccheck import mirror_problems, write_source

from harness_store import StepRecord, Store
from harness_store.errors import MalformedStoreError, UnfinishedTransactionError
from harness_store.sync import DuplicateOriginError, SyncRefusedError, list_origins, sync
from harness_store.transfer import COPY_MARKER, IncompleteCopyError, copy_store
from sync.media import read_only_medium

SIDE = ("-wal", "-shm")


def side_files(path: Path) -> list[str]:
    return [s for s in SIDE if path.with_name(path.name + s).exists()]


def damaged_store(path: Path) -> None:
    """A store whose header is fine and whose table pages are overwritten with garbage."""
    with Store.open(path) as store:
        run = store.start_run("goal", "/x")
        store.checkpoint_steps(
            run, [StepRecord.new(i, "d" * 400, "r" * 400) for i in range(1, 300)]
        )
    size = path.stat().st_size
    with path.open("r+b") as handle:
        for offset in range(4096 * 3, size - 4096, 4096 * 4):
            handle.seek(offset)
            handle.write(b"\xde\xad\xbe\xef" * 256)


@pytest.mark.slow_on("postgresql")
def test_a_source_on_read_only_media_is_synced_and_copied(
    store_target: str, tmp_path: Path
) -> None:
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    write_source(shelf / "agent.sqlite3", runs=2)
    assert side_files(shelf / "agent.sqlite3") == []
    with read_only_medium(shelf, tmp_path / "mounted") as medium:
        source = medium / "agent.sqlite3"
        report = sync([source], store_target)
        assert report.origins[0].counts.rows > 0
        assert mirror_problems(store_target, source) == []
        copied = tmp_path / "copy.sqlite3"
        copy_store(source, copied)
        assert side_files(source) == []
    with Store.open(copied, read_only=True) as store:
        assert len(store.runs()) == 4


@pytest.mark.slow_on("postgresql")
def test_a_synced_or_copied_source_keeps_no_side_files(store_target: str, tmp_path: Path) -> None:
    source = tmp_path / "agent.sqlite3"
    write_source(source, runs=2)
    assert side_files(source) == []
    sync([source], store_target)
    assert side_files(source) == []
    copy_store(source, tmp_path / "copy.sqlite3")
    assert side_files(source) == []
    shown = run_in_process("sync", source, store_target)
    assert shown.returncode == 0, shown.stderr
    assert side_files(source) == []


@pytest.mark.slow_on("postgresql")
def test_a_damaged_source_is_named_and_skipped_and_the_others_synced(
    store_target: str, tmp_path: Path
) -> None:
    first, broken, last = (tmp_path / f"{n}.sqlite3" for n in ("first", "broken", "last"))
    write_source(first, tag="f")
    damaged_store(broken)
    write_source(last, tag="l")
    with pytest.raises(SyncRefusedError) as refused:
        sync([first, broken, last], store_target)
    (left_out,) = refused.value.refused
    assert left_out.source == str(broken)
    assert isinstance(left_out.error, MalformedStoreError) and str(broken) in str(left_out.error)
    assert mirror_problems(store_target, first) == []
    assert mirror_problems(store_target, last) == []
    assert len(list_origins(store_target)) == 2
    shown = run_in_process("sync", first, broken, last, store_target)
    assert shown.returncode == 3
    assert str(broken) in shown.stderr and "damaged" in shown.stderr
    assert "nothing new" in shown.stdout  # the others were read, and had nothing new


@pytest.mark.slow_on("postgresql")
def test_a_source_with_a_hot_journal_is_named_and_skipped_and_the_others_synced(
    store_target: str, tmp_path: Path
) -> None:
    """A source whose writer was killed mid-transaction (a hot rollback journal, which a
    read-only open cannot roll back) is refused by name, like a damaged one, and left as it
    was; the other sources are synced."""
    first, hot = tmp_path / "first.sqlite3", tmp_path / "hot.sqlite3"
    write_source(first, tag="f")
    make_hot_journal(hot)
    journal = hot.with_name(hot.name + "-journal").read_bytes()
    with pytest.raises(SyncRefusedError) as refused:
        sync([first, hot], store_target)
    (left_out,) = refused.value.refused
    assert left_out.source == str(hot)
    assert isinstance(left_out.error, UnfinishedTransactionError)
    assert mirror_problems(store_target, first) == []
    assert hot.with_name(hot.name + "-journal").read_bytes() == journal


@pytest.mark.slow_on("postgresql")
def test_a_writer_that_opens_a_still_source_mid_sync_makes_it_read_again(
    store_target: str, tmp_path: Path
) -> None:
    """A closed store is read as a still file (`immutable=1`, which does not see a writer's
    commits); a writer that opens it while its snapshot is read makes sync read it again, in a
    new snapshot that sees what the writer committed."""
    source = tmp_path / "agent.sqlite3"
    write_source(source, runs=2)
    assert side_files(source) == []
    writer = sqlite3.connect(source, isolation_level=None)
    wrote: list[int] = []

    def write_meanwhile(label: str, done: int, total: int, sent: int) -> None:
        if sent and not wrote:
            writer.execute("INSERT INTO runs (goal, file) VALUES ('late', 'late.txt')")
            wrote.append(1)

    try:
        report = sync([source], store_target, progress=write_meanwhile)
        assert wrote and side_files(source) != []  # the writer is still there
        assert mirror_problems(store_target, source) == []  # its run was read, untorn
        assert report.origins[0].counts.inserted["runs"] == 5
    finally:
        writer.close()
    assert side_files(source) == []


def unfinished_copy(path: Path) -> None:
    """What a copy killed before its commit leaves: the schema, and the unfinished-copy mark."""
    Store.open(path).close()
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(f"CREATE TABLE {COPY_MARKER} (source VARCHAR(2000))")
        conn.commit()


@pytest.mark.slow_on("postgresql")
def test_an_unfinished_copy_is_refused_as_one_by_sync_and_copy_as_by_every_reader(
    store_target: str, tmp_path: Path
) -> None:
    """Sync and copy open their sources through the one read-only open, which refuses what a
    killed copy left (not as a newer io-harness's tables, not copied as a store)."""
    first, unfinished = tmp_path / "first.sqlite3", tmp_path / "unfinished.sqlite3"
    write_source(first, tag="f")
    unfinished_copy(unfinished)
    with pytest.raises(IncompleteCopyError):
        Store.open(unfinished, read_only=True)
    with pytest.raises(SyncRefusedError) as refused:
        sync([first, unfinished], store_target)
    (left_out,) = refused.value.refused
    assert left_out.source == str(unfinished)
    assert isinstance(left_out.error, IncompleteCopyError), left_out.error
    assert str(unfinished) in str(left_out.error)
    assert mirror_problems(store_target, first) == []
    target = tmp_path / "copy.sqlite3"
    with pytest.raises(IncompleteCopyError, match="unfinished copy"):
        copy_store(unfinished, target)
    assert not target.exists()
    assert side_files(unfinished) == []


@pytest.mark.slow_on("postgresql")
def test_two_copies_of_one_marked_store_are_refused_together_and_warned_apart(
    store_target: str, tmp_path: Path
) -> None:
    original, twin = tmp_path / "agent.sqlite3", tmp_path / "agent-copy.sqlite3"
    write_source(original, runs=1)
    sync([original], store_target, mark=True)
    shutil.copyfile(original, twin)
    with pytest.raises(DuplicateOriginError, match="same origin mark"):
        sync([original, twin], store_target)
    shown = run_in_process("sync", original, twin, store_target)
    assert shown.returncode != 0 and "same origin mark" in shown.stderr
    later = sync([twin], store_target)
    assert any(str(original) in w for w in later.origins[0].warnings)
    warned = run_in_process("sync", original, store_target)
    assert warned.returncode == 0 and "warning" in warned.stderr
