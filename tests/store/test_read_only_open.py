"""`Store.open(target, read_only=True)` is the one read-only open (the CLI's read commands and
`harness-store origins` read through it): on a WAL file nobody has open it leaves no side files
and changes nothing, on read-only media it reads, and it sees a writer's commits — a writer
already there, and one that opens the file after the reader did."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from sync.media import read_only_medium

from harness_store import Store

SIDE = ("-wal", "-shm")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def side_files(path: Path) -> list[str]:
    return [suffix for suffix in SIDE if path.with_name(path.name + suffix).exists()]


def closed_store(path: Path, runs: int = 3) -> Path:
    """A WAL store with `runs` runs, closed (so no `-wal`/`-shm` beside it)."""
    with Store.open(path) as store:
        for n in range(runs):
            store.start_run(f"goal {n}", "a.md")
    assert side_files(path) == []
    return path


def test_a_still_file_is_read_without_side_files_and_unchanged(tmp_path: Path) -> None:
    path = closed_store(tmp_path / "runs.sqlite3")
    before = digest(path)
    with Store.open(path, read_only=True) as store:
        assert sorted(store.runs()) == [1, 2, 3]
        assert store.last_run() == 3
    assert side_files(path) == []
    assert digest(path) == before


def test_a_store_on_read_only_media_is_read_without_side_files(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    closed_store(source / "runs.sqlite3")
    before = digest(source / "runs.sqlite3")
    with read_only_medium(source, tmp_path / "media") as media:
        with Store.open(media / "runs.sqlite3", read_only=True) as store:
            assert sorted(store.runs()) == [1, 2, 3]
        assert side_files(media / "runs.sqlite3") == []
    assert digest(source / "runs.sqlite3") == before


def test_a_reader_sees_the_commits_of_a_writer_already_there(tmp_path: Path) -> None:
    path = closed_store(tmp_path / "runs.sqlite3")
    with Store.open(path) as writer, Store.open(path, read_only=True) as reader:
        assert sorted(reader.runs()) == [1, 2, 3]
        made = writer.start_run("after the reader opened", "b.md")
        assert sorted(reader.runs()) == [1, 2, 3, made]
        assert reader.status(made) == "running"


def test_a_reader_of_a_still_file_sees_a_writer_that_opens_later(tmp_path: Path) -> None:
    """The reader opened the file when nobody had it open (read as a still file); a writer
    opens it afterwards and commits: the reader's next read sees the commit."""
    path = closed_store(tmp_path / "runs.sqlite3")
    with Store.open(path, read_only=True) as reader:
        assert sorted(reader.runs()) == [1, 2, 3]
        with Store.open(path) as writer:
            made = writer.start_run("a writer came", "b.md")
            assert sorted(reader.runs()) == [1, 2, 3, made]
            second = writer.start_run("and wrote again", "c.md")
            assert reader.last_run() == second


def test_a_reader_of_a_still_file_sees_a_writer_that_came_and_went_between_two_reads(
    tmp_path: Path,
) -> None:
    """A writer in another process opens the still file, commits and closes before the
    reader reads again, so its side files are gone by then: the reader still sees the commit
    (the file changed under `immutable=1`), instead of reading the file as it was."""
    path = closed_store(tmp_path / "runs.sqlite3")
    with Store.open(path, read_only=True) as reader:
        assert sorted(reader.runs()) == [1, 2, 3]
        subprocess.run(
            [sys.executable, "-c",
             "import sys; from harness_store import Store\n"
             "with Store.open(sys.argv[1]) as w: w.start_run('came and went', 'd.md')",
             str(path)],
            check=True, timeout=120,
        )  # fmt: skip
        assert side_files(path) == []
        assert sorted(reader.runs()) == [1, 2, 3, 4]
        assert reader.status(4) == "running"


def test_a_copy_of_a_live_store_with_its_side_files_is_read_as_it_was(tmp_path: Path) -> None:
    """A store copied while open (its `-wal` and `-shm` with it) onto read-only media: the
    commits still in the copied `-wal` are read, and nothing is created or changed."""
    live = closed_store(tmp_path / "live.sqlite3")
    source = tmp_path / "src"
    source.mkdir()
    with Store.open(live) as writer:
        writer.start_run("only in the wal", "b.md")
        for suffix in ("", *SIDE):
            shutil.copy(f"{live}{suffix}", f"{source / 'runs.sqlite3'}{suffix}")
    with (
        read_only_medium(source, tmp_path / "media") as media,
        Store.open(media / "runs.sqlite3", read_only=True) as store,
    ):
        assert sorted(store.runs()) == [1, 2, 3, 4]
