"""Upgrade safety on real files and real processes: backups in both directions and with the
store's mode, stores left by crashes (hot journal, damaged pages, a full disk), empty files,
newer checkpoint formats, racing upgraders, and the Alembic commands that must change nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
from argparse import Namespace
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text
from support import legacy
from support.clirun import run_in_process
from support.processes import Worker, alembic_argv, alembic_fails, wait_for_file
from support.small_disk import small_disks
from support.sqlite_files import connect

from harness_store import Store
from harness_store.engine import make_engine
from harness_store.errors import (
    MalformedStoreError,
    NotADatabaseError,
    ResumeError,
    StoreAccessError,
    UnfinishedTransactionError,
    UpgradeFailedError,
)
from harness_store.releases import HEAD
from harness_store.schema import migrate

REPO = Path(__file__).resolve().parents[2]

STEPS = 20_000


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def grown_0_11(path: Path, steps: int = STEPS) -> Path:
    """An io-harness 0.11 lineage store (rollback journal) with one run of `steps` steps."""
    legacy.build_lineage(path, "0.11")
    conn = connect(path)
    try:
        conn.execute("BEGIN")
        run = conn.execute("INSERT INTO runs (goal, file) VALUES ('bulk', 'b.txt')").lastrowid
        conn.executemany(
            "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
            "VALUES (?, ?, ?, ?, 'p', '{}', ?)",
            ((run, i, f"decision {i}", "r" * (i % 90), i) for i in range(1, steps + 1)),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return path


def rows(path: Path) -> dict[str, list[tuple[object, ...]]]:
    conn = connect(path)
    try:
        return legacy.dump(conn, typed=True)
    finally:
        conn.close()


def revision(path: Path) -> str | None:
    conn = connect(path)
    try:
        if not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'alembic_version'"
        ).fetchall():
            return None
        return str(conn.execute("SELECT version_num FROM alembic_version").fetchone()[0])
    finally:
        conn.close()


def beside(path: Path) -> list[str]:
    """The names of the files next to the store that carry its name (backups, partials)."""
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name + "."))


# --- backups -------------------------------------------------------------------------------


def test_downgrade_backs_up_first(tmp_path: Path) -> None:
    """A downgrade drops data: with backup=True (the default) it copies the store first."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        store.start_run("goal", "f.txt")
    before = rows(path)
    report = migrate.downgrade(path, "0.7")
    assert report.backup is not None and report.backup.exists()
    assert beside(path) == [report.backup.name]
    assert report.backup.name.startswith(f"runs.sqlite3.{HEAD}-")
    assert rows(report.backup) == before
    assert revision(report.backup) == HEAD
    assert revision(path) == "0.7"
    # Without a backup, nothing is written beside the store.
    migrate.upgrade(path, backup=False)
    migrate.downgrade(path, "0.12", backup=False)
    assert beside(path) == [report.backup.name]


@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_backup_has_the_stores_mode(tmp_path: Path, mode: int) -> None:
    path = grown_0_11(tmp_path / "runs.sqlite3", 100)
    path.chmod(mode)
    old_umask = os.umask(0o022)
    try:
        report = migrate.upgrade(path)
    finally:
        os.umask(old_umask)
    assert report.backup is not None
    assert stat.S_IMODE(report.backup.stat().st_mode) == mode
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_backup_name_is_the_documented_one(tmp_path: Path) -> None:
    """The migrations guide's restore example names a backup `<store>.<revision>-<UTC time>.bak`."""
    path = grown_0_11(tmp_path / "runs.sqlite3", 10)
    report = migrate.upgrade(path)
    assert report.backup is not None
    name = report.backup.name
    assert name.startswith("runs.sqlite3.0.11-") and name.endswith("Z.bak")
    guide = Path(__file__).resolve().parents[2] / "docs" / "guides" / "migrations.md"
    readme = guide.read_text()
    stamp = name.removeprefix("runs.sqlite3.0.11-").removesuffix(".bak")
    example = [w for w in readme.split() if w.startswith("runs.sqlite3.0.") and ".bak" in w]
    assert example, "the migrations guide shows a backup name"
    for shown in example:
        shown_stamp = shown.split("-", 1)[1].removesuffix(".bak").rstrip("`")
        assert len(shown_stamp) == len(stamp), (shown, name)


# --- empty files, newer formats ------------------------------------------------------------


@pytest.mark.parametrize("how", ["Store.open", "migrate.upgrade", "alembic"])
def test_zero_byte_file_becomes_a_store(tmp_path: Path, how: str) -> None:
    path = tmp_path / "runs.sqlite3"
    path.touch()
    if how == "Store.open":
        Store.open(path).close()
    elif how == "migrate.upgrade":
        report = migrate.upgrade(path)
        assert report.backup is None, "an empty file holds nothing to back up"
    else:
        done = subprocess.run(alembic_argv(path), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    assert revision(path) == HEAD
    assert beside(path) == []


def newer_format_store(path: Path, *, at_head: bool) -> Path:
    if at_head:
        with Store.open(path) as store:
            store.start_run("written before", "f.txt")
    else:
        legacy.build_lineage(path, "0.13")
        conn = connect(path)
        conn.execute("INSERT INTO runs (goal, file) VALUES ('written before', 'f.txt')")
        conn.close()
    conn = connect(path)
    conn.execute("PRAGMA user_version = 8")
    conn.close()
    return path


@pytest.mark.parametrize("at_head", [True, False], ids=["at-head", "untracked-0.13"])
def test_newer_checkpoint_format_reads_read_only(tmp_path: Path, at_head: bool) -> None:
    """Upstream opens a store whose user_version is above 7 and refuses only to resume: a
    read-only open reads it; nothing is changed."""
    path = newer_format_store(tmp_path / "v8.sqlite3", at_head=at_head)
    digest = sha256(path)
    conn = connect(path)
    count = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    conn.close()
    with Store.open(path, read_only=True) as store:
        runs = store.runs()
        assert len(runs) == count
        with pytest.raises(ResumeError, match="checkpoint format 8"):
            store.check_resumable(runs[0])
    assert sha256(path) == digest


def test_newer_checkpoint_format_at_head_opens_for_writing(tmp_path: Path) -> None:
    path = newer_format_store(tmp_path / "v8.sqlite3", at_head=True)
    with Store.open(path) as store:
        run = store.start_run("written after", "g.txt")
        assert len(store.runs()) == 2
        with pytest.raises(ResumeError, match="checkpoint format 8"):
            store.check_resumable(run)
    conn = connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 8, "never lowered"
    conn.close()


# --- Alembic commands that change no revision ----------------------------------------------


def test_alembic_check_backs_up_locks_and_stamps_nothing(tmp_path: Path) -> None:
    """`alembic check` on an untracked store while a writer holds its lock: it neither waits
    for the lock nor writes a backup or a stamp."""
    path = tmp_path / "runs.sqlite3"
    legacy.build_lineage(path, "0.13")
    digest = sha256(path)
    holder = connect(path)
    holder.execute("BEGIN IMMEDIATE")
    try:
        argv = [*alembic_argv(path)[:-2], "check"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "locked" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr or "AutogenerateDiffsDetected" in done.stderr
    assert sha256(path) == digest
    assert beside(path) == []
    assert revision(path) is None


@pytest.mark.parametrize("how", ["alembic", "command"])
def test_a_noop_upgrade_waits_for_no_writer(tmp_path: Path, how: str) -> None:
    """`upgrade head` on a store already at head, while a writer holds its write lock: it
    says nothing is to be done without waiting for the lock (it used to take it, and fail
    as locked after the busy timeout), and writes nothing, not even a backup."""
    path = tmp_path / "runs.sqlite3"
    migrate.upgrade(path)
    digest = sha256(path)
    holder = connect(path)
    holder.execute("BEGIN IMMEDIATE")
    try:
        if how == "alembic":
            done = subprocess.run(alembic_argv(path), capture_output=True, text=True, timeout=60)
        else:
            done = run_in_process("upgrade", path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert done.returncode == 0, done.stderr
    assert "locked" not in done.stderr + done.stdout
    if how == "command":
        assert "nothing to do" in done.stdout and "backup: none (nothing changed)" in done.stdout
    assert sha256(path) == digest
    assert beside(path) == []
    assert revision(path) == HEAD


def test_a_noop_upgrade_loads_neither_models_nor_store(tmp_path: Path) -> None:
    """What a no-op upgrade imports: the chain and detection, not the 37 models, the ORM
    Store or the copy machinery (they were a good part of its time as a new process)."""
    path = tmp_path / "runs.sqlite3"
    migrate.upgrade(path)
    probe = (
        "import sys\n"
        "from harness_store.cli import main\n"
        "try:\n"
        "    main(['upgrade', sys.argv[1]])\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "from alembic.config import main as alembic\n"
        "alembic(['-c', sys.argv[2], '-x', 'db=' + sys.argv[1], 'upgrade', 'head'])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('harness_store.models', "
        "'harness_store.store', 'sqlalchemy.orm'))))\n"
    )
    ini = Path(__file__).resolve().parents[2] / "alembic.ini"
    done = subprocess.run(
        [sys.executable, "-c", probe, str(path), str(ini)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "nothing to do" in done.stdout
    assert done.stdout.splitlines()[-1] == "[]"


def test_alembic_current_does_not_create_a_store(tmp_path: Path) -> None:
    path = tmp_path / "nothing.sqlite3"
    argv = [*alembic_argv(path)[:-2], "current"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "no run store at" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_cookbook_connection_in_a_transaction(tmp_path: Path) -> None:
    """Alembic's cookbook: the caller's transaction is used, and committed by the caller."""
    path = grown_0_11(tmp_path / "runs.sqlite3", 50)
    conn = connect(path)
    columns = legacy.column_names(conn)
    before = legacy.dump(conn, columns, typed=True)
    conn.close()
    engine = create_engine(f"sqlite:///{path}")
    try:
        config = migrate.alembic_config()
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD
        # The same, rolled back by the caller: nothing of it stays.
        other = grown_0_11(tmp_path / "other.sqlite3", 50)
        engine2 = make_engine(other)  # harness_store's engine: transactional DDL
        with pytest.raises(RuntimeError), engine2.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
            raise RuntimeError("the caller changes its mind")
        engine2.dispose()
        assert revision(other) is None
    finally:
        engine.dispose()
    conn = connect(path)
    try:
        assert legacy.dump(conn, columns, typed=True) == before
    finally:
        conn.close()


def test_ini_without_logging_sections(tmp_path: Path) -> None:
    """An ini with only `[alembic]` and `script_location` is a whole configuration: env.py
    configures logging only when the ini has logging sections. (The packaged
    `harness_store:migrations` location is tried from an installed wheel in test_wheel.)"""
    ini = tmp_path / "alembic.ini"
    location = Path(migrate.script_location())
    ini.write_text(f"[alembic]\nscript_location = {location}\n")
    path = tmp_path / "runs.sqlite3"
    alembic = Path(sys.executable).with_name("alembic")
    done = subprocess.run(
        [str(alembic), "-x", f"db={path}", "upgrade", "head"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert revision(path) == HEAD


# --- crashed stores ------------------------------------------------------------------------

KILL_MID_TRANSACTION = """
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size = 1")  # spill changed pages into the file mid-transaction
conn.execute("BEGIN")
conn.execute("UPDATE steps SET decision = 'never committed'")
os.kill(os.getpid(), signal.SIGKILL)
"""


def hot_journal_store(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """A pre-0.12 store whose writer was killed mid-transaction: a hot `-journal` beside it,
    and changed pages in the file. Returns the committed rows."""
    grown_0_11(path, 5_000)
    committed = rows(path)
    killed = subprocess.run([sys.executable, "-c", KILL_MID_TRANSACTION, str(path)], check=False)
    assert killed.returncode == -signal.SIGKILL
    journal = path.with_name(path.name + "-journal")
    assert journal.exists() and journal.stat().st_size > 0
    return committed


def test_hot_journal_read_only_says_unfinished_transaction(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    hot_journal_store(path)
    Store.open(path, backup=False).close()  # bring it to head first, then leave a journal
    conn = connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    subprocess.run([sys.executable, "-c", KILL_MID_TRANSACTION, str(path)], check=False)
    assert path.with_name(path.name + "-journal").exists()
    digest = sha256(path)
    with pytest.raises(UnfinishedTransactionError, match="unfinished transaction"):
        Store.open(path, read_only=True)
    assert sha256(path) == digest


@pytest.mark.parametrize("how", ["migrate.upgrade", "alembic"])
def test_upgrade_recovers_a_hot_journal(tmp_path: Path, how: str) -> None:
    path = tmp_path / "runs.sqlite3"
    committed = hot_journal_store(path)
    if how == "alembic":
        done = subprocess.run(alembic_argv(path), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    else:
        report = migrate.upgrade(path)
        assert report.backup is not None
        assert rows(report.backup) == committed, "the backup holds the committed rows"
    assert revision(path) == HEAD
    conn = connect(path)
    try:
        columns = {t: [c[1] for c in conn.execute(f"PRAGMA table_info({t})")] for t in committed}
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    conn = connect(path)
    try:
        now = {
            t: [tuple(r) for r in conn.execute(f"SELECT * FROM {t} ORDER BY rowid")]
            for t in committed
        }
        assert now["steps"][0][: len(columns["steps"])]
        decisions = {r[0] for r in conn.execute("SELECT decision FROM steps")}
        assert "never committed" not in decisions
    finally:
        conn.close()


def damaged_store(path: Path) -> Path:
    """A store whose `steps` table has a damaged b-tree page (an invalid page type)."""
    grown_0_11(path, 5_000)
    conn = connect(path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'steps'").fetchone()[0]
    conn.close()
    with path.open("r+b") as handle:
        handle.seek(page_size * (root - 1))
        handle.write(b"\x07")
    return path


@pytest.mark.parametrize("how", ["migrate.upgrade", "Store.open", "alembic"])
def test_damaged_store_is_refused_before_any_backup(tmp_path: Path, how: str) -> None:
    path = damaged_store(tmp_path / "runs.sqlite3")
    digest = sha256(path)
    if how == "alembic":
        with pytest.raises(MalformedStoreError) as raised:
            Store.open(path)
        alembic_fails(alembic_argv(path), str(raised.value))
    else:
        with pytest.raises(MalformedStoreError, match="quick_check") as raised:
            migrate.upgrade(path) if how == "migrate.upgrade" else Store.open(path)
        assert isinstance(raised.value, NotADatabaseError)
    assert sha256(path) == digest
    assert beside(path) == []


# --- a full disk -----------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[object]:
    """Factory: a tmpfs of `size` bytes mounted in the test's directory (needs root)."""
    with small_disks(tmp_path) as make:
        yield make


def header_modes(path: Path) -> bytes:
    """Bytes 18–19 of the SQLite header: 1,1 for a rollback journal, 2,2 for WAL."""
    with path.open("rb") as handle:
        return handle.read(20)[18:20]


@pytest.mark.parametrize("stage", ["backup", "upgrade"])
def test_full_disk_leaves_the_store_and_no_backup(
    tmp_path: Path, small_disk: object, stage: str
) -> None:
    original = grown_0_11(tmp_path / "original.sqlite3")
    size = original.stat().st_size
    # Room for the store and half a backup, or for the store and a whole backup but not for
    # the upgrade's new indexes.
    room = size + (size // 2 if stage == "backup" else size + 48 * 1024)
    disk = small_disk(room)  # type: ignore[operator]
    path = disk / "runs.sqlite3"
    shutil.copyfile(original, path)
    digest = sha256(path)
    assert header_modes(path) == b"\x01\x01"
    with pytest.raises(UpgradeFailedError) as raised:
        migrate.upgrade(path)
    assert raised.value.stage == stage and raised.value.unchanged
    assert "unchanged" in str(raised.value)
    assert header_modes(path) == b"\x01\x01", "not switched to WAL by a failed upgrade"
    assert sha256(path) == digest
    assert sorted(p.name for p in disk.iterdir()) == ["runs.sqlite3"]


# --- concurrent upgraders ------------------------------------------------------------------


@pytest.mark.slow
def test_racing_upgrades_write_one_backup(tmp_path: Path) -> None:
    """Two processes upgrading one store at the same instant: one upgrades and backs up; the
    other, having waited for the lock, says it found nothing to do and writes no backup."""
    original = grown_0_11(tmp_path / "original.sqlite3", 60_000)
    problems = []
    raced = 0
    for round_ in range(3):
        directory = tmp_path / f"round{round_}"
        directory.mkdir()
        path = directory / "runs.sqlite3"
        shutil.copyfile(original, path)
        barrier = directory / "barrier"
        barrier.mkdir()
        racers = [Worker.script("upgrader.py", "report", path, barrier, f"r{i}") for i in range(2)]
        for i, racer in enumerate(racers):
            assert wait_for_file(barrier / f"ready-r{i}", timeout=60), racer.stderr
        (barrier / "go").touch()
        reports = []
        for racer in racers:
            assert racer.finish(timeout=120) == 0, racer.stderr
            reports.append(racer.lines[-1].split())
        backups = sorted(directory.glob("*.bak"))
        changed = [r for r in reports if r[1] == "changed=True"]
        if len(backups) != 1 or len(changed) != 1:
            problems.append(f"round {round_}: {len(backups)} backups, reports {reports}")
        for r in reports:
            if r[1] == "changed=False" and r[3] != "backup=None":
                problems.append(f"round {round_}: an upgrade that did nothing backed up: {r}")
        raced += sum(r[2] == "raced=True" for r in reports)
    assert not problems, "\n".join(problems)
    assert raced, "at least one round raced (both saw work before the lock)"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["store", "alembic"])
def test_postgresql_concurrent_first_opens(pg_url: str, tmp_path: Path, mode: str) -> None:
    """Five processes opening (and so creating) one new PostgreSQL database at once all
    succeed; the chain runs once."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    racers = [Worker.script("upgrader.py", mode, pg_url, barrier, f"p{i}") for i in range(5)]
    try:
        for i, racer in enumerate(racers):
            assert wait_for_file(barrier / f"ready-p{i}", timeout=60), racer.stderr
        (barrier / "go").touch()
        failed = []
        for racer in racers:
            code = racer.finish(timeout=120)
            if code != 0:
                failed.append((code, racer.lines, racer.stderr[-800:]))
    finally:
        for racer in racers:
            racer.kill()
    assert not failed, failed
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).all() == [(HEAD,)]
    finally:
        engine.dispose()
    with Store.open(pg_url) as store:
        assert store.runs() == []


def test_postgresql_downgrade_needs_no_backup_file(pg_url: str) -> None:
    """PostgreSQL has no file to copy: a downgrade says so by leaving `backup` empty."""
    migrate.upgrade(pg_url)
    report = migrate.downgrade(pg_url, "0.12")
    assert report.backup is None and report.after == "0.12"


def test_alembic_check_reads_a_read_only_store(tmp_path: Path) -> None:
    """`alembic check` writes nothing, yet refused a store without write permission as
    read-only; it compares it, and an upgrade with nothing to do passes too. An upgrade with
    work is still refused before anything is written."""
    path = tmp_path / "runs.sqlite3"
    migrate.upgrade(path, backup=False)
    path.chmod(0o444)
    before = path.read_bytes()
    config = Config(str(REPO / "alembic.ini"), cmd_opts=Namespace(x=[f"db={path}"]))
    command.check(config)
    assert migrate.upgrade(path).changed is False
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.sqlite3"]
    old = tmp_path / "old.sqlite3"
    migrate.upgrade(old, "0.13", backup=False)
    old.chmod(0o444)
    with pytest.raises(StoreAccessError, match="read-only"):
        migrate.upgrade(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.sqlite3", "runs.sqlite3"]
