"""`harness-store sync --follow` as a service runs it: a real follower process beside real
writer processes (`workers/follow_writer.py`), into a real centre. Every condition is an
event — a line the follower or a writer printed, the centre found to mirror a source by
polling until a generous deadline — never a sleep or a time measured."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from support.new_stores import new_sqlite_store
from support.processes import Worker
from support.synccheck import mirror_problems, write_source

from harness_store import StepRecord, Store

DEADLINE = 120.0
"""Seconds to wait for an event before the test fails (the machine may be loaded)."""

STARTED: list[Worker] = []
"""Every process a test started, killed after it (a failed test leaves none running)."""


@pytest.fixture(autouse=True)
def reaped() -> Iterator[None]:
    yield
    while STARTED:
        STARTED.pop().kill()


class Follower:
    """A `harness-store sync --follow … --json` process, its JSON lines read as they come."""

    def __init__(self, sources: list[Path], dest: str, *extra: str) -> None:
        argv = [sys.executable, "-m", "harness_store.cli", "sync", "--follow"]
        self.worker = Worker([*argv, *map(str, sources), dest, "--json", *extra])
        STARTED.append(self.worker)

    def wait(self, what: Callable[[dict[str, Any]], bool], timeout: float = DEADLINE) -> Any:
        """The next event (a JSON line) `what` holds for."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.worker.wait_line("{", max(0.1, deadline - time.monotonic()))
            except AssertionError as exc:  # say what the follower did say
                said = "\n".join(self.worker.lines[-20:])
                raise AssertionError(f"{exc}\nlast lines:\n{said}\n{self.worker.stderr}") from None
            event = json.loads(line)
            if what(event):
                return event

    def events(self, kind: str = "pass") -> list[dict[str, Any]]:
        """Every event of `kind` printed so far."""
        found = [json.loads(line) for line in list(self.worker.lines) if line.startswith("{")]
        return [e for e in found if e["event"] == kind]

    def sent(self, source: Path) -> int:
        """Passes over `source` that sent something so far."""
        return sum(1 for e in self.events() if e["source"] == str(source) and e["rows"])

    def stop(self) -> int:
        """SIGTERM, then the exit code."""
        os.kill(self.worker.proc.pid, signal.SIGTERM)
        return self.worker.finish(timeout=DEADLINE)

    def kill(self) -> None:
        self.worker.kill()


def sent_from(source: Path) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["event"] == "pass" and e["source"] == str(source) and e["rows"] > 0


def caught_up(dest: str, source: Path, timeout: float = DEADLINE) -> None:
    """Poll until the centre holds exactly the source's rows (or fail at the deadline), the
    looks ever further apart (each reads every table of both stores: a wait that spins takes the
    CPU the follower needs to catch up)."""
    deadline = time.monotonic() + timeout
    pause = 0.05
    while True:
        try:
            problems = mirror_problems(dest, source)
        except Exception as exc:  # the centre is not there yet (created by the first pass)
            problems = [f"centre not readable: {exc!r}"]
        if not problems:
            return
        assert time.monotonic() < deadline, problems[:5]
        time.sleep(pause)
        pause = min(pause * 2, 0.8)


def writer(path: Path, stop_file: Path, pace: int = 50, most: int | None = None) -> Worker:
    """A live writer of the store at `path` (a new one, unless one is there: the writer
    opens it rather than walk the chain in its own process)."""
    args: list[object] = [new_sqlite_store(path), stop_file, pace]
    args += [most] if most is not None else []
    started = Worker.script("follow_writer.py", *args)
    STARTED.append(started)
    started.wait_line("ready", DEADLINE)
    return started


def finish_writers(stop_file: Path, *writers: Worker) -> None:
    stop_file.touch()
    for w in writers:
        w.wait_line("done", DEADLINE)
        assert w.finish(timeout=DEADLINE) == 0, w.stderr


def grow(path: Path, tag: str, steps: int) -> None:
    """One more run with `steps` steps, written as io-harness would."""
    with Store.open(path) as store:
        run = store.start_run(f"goal {tag}", f"/src/{tag}.rs")
        store.checkpoint_steps(
            run, [StepRecord.new(i, f"{tag}{i}", "ok") for i in range(1, steps + 1)]
        )


@pytest.mark.slow_on("postgresql")
def test_live_writers_are_followed_while_they_write(store_target: str, tmp_path: Path) -> None:
    sources = [tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"]
    stop_file = tmp_path / "stop"
    writers = [writer(s, stop_file) for s in sources]
    follower = Follower(sources, store_target)
    for source in sources:  # each source sends again and again while its writer writes
        follower.wait(sent_from(source))
        follower.wait(sent_from(source))
        assert writers[sources.index(source)].proc.poll() is None
    finish_writers(stop_file, *writers)
    for source in sources:
        caught_up(store_target, source)
    assert follower.stop() == 0, follower.worker.stderr
    passes = follower.events()
    assert all(p["delay"] >= 0 and p["seconds"] >= 0 for p in passes)
    (summary,) = follower.events("summary")
    assert summary["rows"] == sum(p["rows"] for p in passes)


@pytest.mark.slow_on("postgresql")
def test_sigterm_sends_what_was_committed_then_exits_0(store_target: str, tmp_path: Path) -> None:
    src = tmp_path / "agent.sqlite3"
    write_source(src, runs=2)
    follower = Follower([src], store_target)
    follower.wait(sent_from(src))
    grow(src, "last", 7)  # committed, then the stop comes at once

    assert follower.stop() == 0, follower.worker.stderr

    assert mirror_problems(store_target, src) == []  # no second look needed
    assert "Traceback" not in follower.worker.stderr
    assert follower.events("summary")


@pytest.mark.slow_on("postgresql")
def test_a_source_that_appears_late_is_sent(store_target: str, tmp_path: Path) -> None:
    src = tmp_path / "later.sqlite3"
    follower = Follower([src], store_target)
    follower.wait(lambda e: e["event"] == "waiting" and e["source"] == str(src))
    write_source(src, runs=2)
    caught_up(store_target, src)
    away = tmp_path / "away.sqlite3"
    os.replace(src, away)  # gone from its path: said once, then waited for
    follower.wait(lambda e: e["event"] == "deleted" and e["source"] == str(src))
    os.replace(away, src)  # and back, then written to again
    grow(src, "back", 3)
    caught_up(store_target, src)
    assert follower.stop() == 0, follower.worker.stderr
    assert len(follower.events("waiting")) == len(follower.events("deleted")) == 1


@pytest.mark.slow_on("postgresql")
def test_a_source_replaced_by_an_older_backup_is_read_again(
    store_target: str, tmp_path: Path
) -> None:
    src = tmp_path / "agent.sqlite3"
    write_source(src, runs=2)
    follower = Follower([src], store_target)
    caught_up(store_target, src)
    backup = tmp_path / "agent.sqlite3.bak"
    shutil.copyfile(src, backup)
    grow(src, "after-backup", 5)
    caught_up(store_target, src)
    fresh = src.with_name(src.name + ".restoring")  # the backup put back as a new file
    shutil.copyfile(backup, fresh)
    for side in ("-wal", "-shm"):  # the replaced file's own: SQLite would replay its WAL
        Path(f"{src}{side}").unlink(missing_ok=True)  # onto the backup, undoing the restore
    os.replace(fresh, src)
    grow(src, "after-restore", 3)  # new ids at or below what was sent

    follower.wait(lambda e: e["event"] == "pass" and e["reread"] is not None)
    caught_up(store_target, src)
    assert follower.stop() == 0, follower.worker.stderr


IDLE_WINDOW = 3.0
"""Seconds the follower is watched doing nothing: several of its longest waits between looks
(`MAX_INTERVAL`), so a follower that passes while nothing changes makes a pass in it. A load
on the machine can only make it look less often, never pass more."""


@pytest.mark.slow_on("postgresql")
def test_an_idle_follower_makes_no_pass(store_target: str, tmp_path: Path) -> None:
    src, stop_file = tmp_path / "agent.sqlite3", tmp_path / "stop"
    held = writer(src, stop_file, pace=200, most=30)  # then holds the store open, idle
    follower = Follower([src], store_target)
    held.wait_line("idle", DEADLINE)
    caught_up(store_target, src)
    time.sleep(IDLE_WINDOW)  # the pass of a commit seen during the last one has come
    before = len(follower.events())
    time.sleep(IDLE_WINDOW)  # absence can only be seen over a window
    assert len(follower.events()) == before
    grow(src, "wake", 2)  # it still sees the next commit
    caught_up(store_target, src)
    finish_writers(stop_file, held)
    assert follower.stop() == 0, follower.worker.stderr


def test_connections_terminated_twice_while_following(pg_url: str, tmp_path: Path) -> None:
    from sqlalchemy import text

    from harness_store.engine import make_engine

    src, stop_file = tmp_path / "agent.sqlite3", tmp_path / "stop"
    live = writer(src, stop_file)
    follower = Follower([src], pg_url)
    admin = make_engine(pg_url)
    try:
        for _ in range(2):
            follower.wait(sent_from(src))
            with admin.connect() as conn:
                ended = conn.execute(
                    text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                ).scalar_one()
                conn.commit()
            assert ended >= 1
            follower.wait(sent_from(src))  # following again after it
    finally:
        admin.dispose()
    finish_writers(stop_file, live)
    caught_up(pg_url, src)
    assert follower.worker.proc.poll() is None
    assert follower.stop() == 0, follower.worker.stderr


def test_a_centre_of_a_newer_schema_ends_it_with_one_line(tmp_path: Path) -> None:
    import sqlite3
    from contextlib import closing

    src, centre = tmp_path / "agent.sqlite3", tmp_path / "centre.sqlite3"
    write_source(src, runs=1)
    Store.open(centre).close()
    with closing(sqlite3.connect(centre)) as conn, conn:
        conn.execute("CREATE TABLE from_the_future (id INTEGER PRIMARY KEY)")
        conn.execute("UPDATE alembic_version SET version_num = 'hs99'")
    follower = Follower([src], str(centre))
    code = follower.worker.finish(timeout=DEADLINE)
    assert code == 3
    lines = follower.worker.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0]


@pytest.mark.slow
def test_three_sigkills_then_every_row_once(store_target: str, tmp_path: Path) -> None:
    import random

    from harness_store.sync import sync

    rng = random.Random(41)
    src, stop_file = tmp_path / "agent.sqlite3", tmp_path / "stop"
    live = writer(src, stop_file)
    for _ in range(3):
        follower = Follower([src], store_target)
        for _ in range(rng.randrange(1, 4)):  # some passes in, then a random moment
            follower.wait(sent_from(src))
        time.sleep(rng.uniform(0, 0.3))
        follower.kill()
        assert follower.worker.killed
    last = Follower([src], store_target)
    last.wait(sent_from(src))
    finish_writers(stop_file, live)
    caught_up(store_target, src)
    assert last.stop() == 0, last.worker.stderr
    assert mirror_problems(store_target, src) == []
    assert sync([src], store_target).rows == 0


def test_an_on_event_that_raises_ends_follow_with_its_error(tmp_path: Path) -> None:
    import threading

    from harness_store.sync import follow

    src = tmp_path / "agent.sqlite3"
    write_source(src, runs=1)
    stop, gave_up = threading.Event(), threading.Event()

    def give_up() -> None:  # a follower that swallowed the error would only stop here
        gave_up.set()
        stop.set()

    guard = threading.Timer(DEADLINE, give_up)
    guard.start()

    def on_event(event: object) -> None:
        raise BrokenPipeError("the reader went away")

    try:
        with pytest.raises(BrokenPipeError):
            follow([src], tmp_path / "centre.sqlite3", stop=stop, on_event=on_event)
    finally:
        guard.cancel()
    assert not gave_up.is_set()


def marked_copies(tmp_path: Path) -> tuple[Path, Path]:
    """A store given an origin mark (by a sync into a scratch centre) and a copy of it: two
    files carrying one mark."""
    from harness_store.sync import sync

    original, twin = tmp_path / "agent.sqlite3", tmp_path / "agent-copy.sqlite3"
    write_source(original, runs=1)
    sync([original], new_sqlite_store(tmp_path / "scratch.sqlite3"), mark=True)
    shutil.copyfile(original, twin)
    return original, twin


def origins_in(dest: str) -> int:
    """How many origins the centre records (0 when it holds no sync's tables, or no file)."""
    from sqlalchemy import inspect

    from harness_store.engine import make_engine
    from harness_store.models.sync import ORIGINS

    if "://" not in dest and not Path(dest).exists():
        return 0
    engine = make_engine(dest)
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table(ORIGINS.name):
                return 0
            return len(conn.execute(ORIGINS.select()).all())
    finally:
        engine.dispose()


def test_two_sources_carrying_one_origin_mark_are_refused_as_sync_refuses_them(
    store_target: str, tmp_path: Path
) -> None:
    from support.clirun import run_cli

    original, twin = marked_copies(tmp_path)
    follower = Follower([original, twin], store_target)
    code = follower.worker.finish(timeout=DEADLINE)
    synced = run_cli("sync", original, twin, store_target)
    assert code == synced.returncode != 0
    lines = follower.worker.stderr.strip().splitlines()
    assert len(lines) == 1 and "same origin mark" in lines[0], follower.worker.stderr
    assert origins_in(store_target) == 0  # nothing was sent


def test_a_source_that_comes_to_carry_anothers_mark_is_refused_and_the_other_followed(
    store_target: str, tmp_path: Path
) -> None:
    original, twin = marked_copies(tmp_path)
    twin.unlink()
    follower = Follower([original, twin], store_target)
    caught_up(store_target, original)
    coming = tmp_path / "coming.sqlite3"  # a copy of the followed store, grown apart
    shutil.copyfile(original, coming)
    grow(coming, "copy", 4)
    os.replace(coming, twin)
    refused = follower.wait(lambda e: e["event"] == "refused" and e["source"] == str(twin))
    assert "same origin mark" in refused["message"]
    grow(original, "more", 3)  # the first holder of the mark is still followed
    caught_up(store_target, original)
    assert follower.sent(twin) == 0
    assert follower.stop() == 0, follower.worker.stderr
    assert mirror_problems(store_target, original) == []


def test_a_sync_of_the_source_between_two_passes_is_not_undone(
    store_target: str, tmp_path: Path
) -> None:
    """A follower keeps a source's id maps from pass to pass. A `sync` of the same source in
    between (another process's, here made while the follower waits in `on_event`) that reads
    a restored backup again in full gives its runs new central ids: the next pass must see
    that, not update and link to the ids of its own last pass (on PostgreSQL the new ids are
    new numbers; SQLite gives the same ones again)."""
    import threading

    from harness_store.sync import FollowPass, follow, sync

    src, backup = tmp_path / "agent.sqlite3", tmp_path / "agent.sqlite3.bak"
    write_source(src, runs=1)
    shutil.copyfile(src, backup)
    grow(src, "before", 3)
    stop, synced_between = threading.Event(), threading.Event()
    guard = threading.Timer(DEADLINE, stop.set)
    guard.start()

    def on_event(event: object) -> None:
        if not isinstance(event, FollowPass):
            return
        if synced_between.is_set():
            stop.set()  # the pass after the other sync has committed
        elif event.rows:
            for side in ("-wal", "-shm"):
                Path(f"{src}{side}").unlink(missing_ok=True)
            shutil.copyfile(backup, src)  # restored: the next run reuses an id sent
            with Store.open(src) as store:
                run = store.start_run("goal after", "/src/after.rs")
                store.checkpoint_steps(run, [StepRecord.new(1, "a1", "ok")])
            assert sync([src], store_target).origins[0].reread  # new central ids
            with Store.open(src) as store:  # then the run changes: the follower's to send
                store.checkpoint_steps(run, [StepRecord.new(2, "a2", "ok")])
                store.finish_run(run, "success")
            synced_between.set()

    try:
        report = follow([src], store_target, stop=stop, on_event=on_event)
    finally:
        guard.cancel()
    assert synced_between.is_set()
    assert report.retries == 0  # no pass failed (on PostgreSQL a stale id breaks a link)
    assert mirror_problems(store_target, src) == []


def test_a_value_the_centre_cannot_hold_is_refused_by_name_not_retried(
    pg_url: str, tmp_path: Path
) -> None:
    """Text that is not UTF-8 in a session's own row (no run's, so none to hold: it refuses
    its source; in a run's row it only quarantines the run, `test_quarantine`) is a
    refusal, said once with the row, not an outage retried forever: the other host flows
    meanwhile, and once the row is repaired the host's runs arrive, each once."""
    from support.synccheck import add_session

    host, other = tmp_path / "host.sqlite3", tmp_path / "other.sqlite3"
    session = add_session(host, write_source(host, runs=2, tag="h"))
    write_source(other, runs=1, tag="o")
    with closing(sqlite3.connect(host)) as conn, conn:
        conn.execute(f"UPDATE sessions SET root = CAST(x'41ff42' AS TEXT) WHERE id = {session}")
    follower = Follower([host, other], pg_url)
    refused = follower.wait(lambda e: e["event"] == "refused" and e["source"] == str(host))
    assert f"sessions.root of the row id={session}" in refused["message"]
    assert "not UTF-8" in refused["message"]
    caught_up(pg_url, other)  # its first pass may have come before the refusal, or after
    grow(other, "later", 2)  # the other host keeps flowing
    follower.wait(sent_from(other))
    with closing(sqlite3.connect(host)) as conn, conn:
        conn.execute(f"UPDATE sessions SET root = 'repaired' WHERE id = {session}")
    follower.wait(sent_from(host))
    caught_up(pg_url, host)
    assert follower.stop() == 0
    assert not [e for e in follower.events("retrying") if e["source"] == str(host)]
    assert mirror_problems(pg_url, host) == [] and mirror_problems(pg_url, other) == []
