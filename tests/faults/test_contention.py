"""Contention with real processes: writers, readers, a lock held too long, racing upgraders.

SQLite file stores are in WAL (as io-harness 0.12+ leaves them): readers never wait for the
writer, writers queue on the write lock for at most the 5 s busy timeout. Every process here is
a separate Python interpreter running a script from `tests/workers/`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import legacy
from support.big_stores import BigStore, indexes, make_big_store, whole_revision
from support.processes import Worker, alembic_argv, wait_for_file
from support.sqlite_files import connect, integrity_ok

from harness_store import StepRecord, Store
from harness_store.errors import StoreLockedError
from harness_store.formats import BUSY_TIMEOUT_SECONDS
from harness_store.releases import HEAD, REVISIONS

WRITERS = 4
READERS = 2
CHECKPOINTS = 500
HOLD_SECONDS = 7.0
RACE_ROUNDS = 5
UPGRADE_HOLD_SECONDS = 8.0


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    """Workers a test starts; any still running at the end are killed."""
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.kill()


# --- 4 writers × 500 checkpoints, 2 readers ---------------------------------------------------


@pytest.mark.slow
def test_writers_and_readers_in_wal(tmp_path: Path, workers: list[Worker]) -> None:
    """4 writer processes checkpoint 500 steps each while 2 reader processes read trees,
    summaries and counts throughout: no errors, exact counts, and no reader ever sees a step
    without its checkpoint event (or a summary before its steps)."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        root = store.start_run("root of the contention tree", "tree.txt")
        children = [
            store.start_child_run(f"writer {i}", f"w{i}.txt", root, 1) for i in range(WRITERS)
        ]
    conn = connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()
    go, stop = tmp_path / "go", tmp_path / "stop"
    writers = [
        Worker.script("contention_writer.py", path, child, CHECKPOINTS, go) for child in children
    ]
    readers = [
        Worker.script("contention_reader.py", path, root, CHECKPOINTS, go, stop)
        for _ in range(READERS)
    ]
    workers += writers + readers
    for worker in workers:
        worker.wait_line("ready", timeout=60)
    go.touch()
    for writer in writers:
        assert writer.finish(timeout=180) == 0, writer.stderr
        assert writer.lines == ["ready", f"done {CHECKPOINTS}"]
        assert writer.stderr == ""
    stop.touch()
    partial = 0
    for reader in readers:
        assert reader.finish(timeout=60) == 0, reader.stderr
        assert reader.stderr == ""
        found = re.fullmatch(r"reads (\d+) partial (\d+)", reader.lines[-1])
        assert found, reader.lines
        assert int(found[1]) >= 2
        partial += int(found[2])
    assert partial > 0, "the readers never read while the writers were writing"

    with Store.open(path, upgrade=False) as store:
        nodes = store.tree(root)
        assert [(n.run_id, n.steps, n.tokens) for n in nodes] == [(root, 0, 0)] + [
            (c, CHECKPOINTS, CHECKPOINTS) for c in children
        ]
        assert store.spent_tokens_tree(root) == WRITERS * CHECKPOINTS
        for child in children:
            assert [s.step for s in store.steps(child)] == list(range(1, CHECKPOINTS + 1))
            assert [e.step for e in store.checkpoint_events(child)] == list(
                range(1, CHECKPOINTS + 1)
            )
            summary = store.run_summary(child)
            assert summary is not None
            assert (summary.outcome, summary.steps, summary.tokens) == (
                "success",
                CHECKPOINTS,
                CHECKPOINTS,
            )
    conn = connect(path)
    try:
        assert conn.execute(
            "SELECT count(*), count(DISTINCT run_id || ':' || step) FROM steps"
        ).fetchone() == (WRITERS * CHECKPOINTS, WRITERS * CHECKPOINTS)
        assert conn.execute("SELECT count(*) FROM checkpoint_events").fetchone() == (
            WRITERS * CHECKPOINTS,
        )
    finally:
        conn.close()
    integrity_ok(path)


# --- a writer holding the lock past the busy timeout ----------------------------------------


def attempt_all(operations: dict[str, Callable[[], object]]) -> dict[str, tuple[object, float]]:
    """Run each operation in its own thread at once; (exception or result, seconds) each."""
    results: dict[str, tuple[object, float]] = {}

    def run(name: str, operation: Callable[[], object]) -> None:
        start = time.monotonic()
        try:
            outcome: object = operation()
        except Exception as exc:
            outcome = exc
        results[name] = (outcome, time.monotonic() - start)

    threads = [threading.Thread(target=run, args=item) for item in operations.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HOLD_SECONDS + 30)
    return results


def assert_locked_within_timeout(results: dict[str, tuple[object, float]]) -> None:
    """Each outcome is a `StoreLockedError` raised after roughly the busy timeout: not at
    once (the wait is what lets a short write by another process go through), and well
    before the holder lets go (a hang would end only then, with the write done)."""
    problems = []
    for name, (outcome, seconds) in results.items():
        if not isinstance(outcome, StoreLockedError):
            problems.append(f"{name}: got {type(outcome).__module__}.{outcome!r}")
        if not BUSY_TIMEOUT_SECONDS - 1.0 <= seconds < HOLD_SECONDS - 0.2:
            problems.append(f"{name}: gave up after {seconds:.2f}s, not ~{BUSY_TIMEOUT_SECONDS}s")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_lock_held_past_busy_timeout(tmp_path: Path, workers: list[Worker]) -> None:
    """Another process holds `BEGIN IMMEDIATE` for 7 s: each write through the Store gets
    `StoreLockedError` after about the 5 s busy timeout, reads go on meanwhile, nothing half
    written is left, the store is not corrupt, and writing works again afterwards."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run_id = store.start_run("contended", "c.txt")
        store.checkpoint_step(run_id, StepRecord(1, "first", "ok", "", "", 5))
    holder = Worker.script("lock_holder.py", path, HOLD_SECONDS)
    workers.append(holder)
    holder.wait_line("locked")

    started = time.monotonic()
    stores = [Store.open(path, upgrade=False) for _ in range(4)]
    assert time.monotonic() - started < 2.0, "opening a store at head must not wait on writers"
    try:
        reader = stores[0]
        started = time.monotonic()
        assert [s.step for s in reader.steps(run_id)] == [1]
        assert [n.steps for n in reader.tree(run_id)] == [1]
        assert time.monotonic() - started < 1.0, "reads must not wait on the writer in WAL"
        results = attempt_all(
            {
                "checkpoint_step": lambda: stores[0].checkpoint_step(
                    run_id, StepRecord(2, "second", "ok", "", "", 5)
                ),
                "finish_run": lambda: stores[1].finish_run(run_id, "success"),
                "memory_put": lambda: stores[2].memory_put("/ws", "k", "v", run_id, 1),
                "start_run": lambda: stores[3].start_run("another", "a.txt"),
            }
        )
        assert_locked_within_timeout(results)
    finally:
        for store in stores:
            store.close()
    assert holder.finish(timeout=HOLD_SECONDS + 10) == 0, holder.stderr
    assert holder.lines == ["locked", "released"]

    integrity_ok(path)
    conn = connect(path)
    try:
        assert conn.execute("SELECT id, goal, outcome, status FROM runs").fetchall() == [
            (run_id, "contended", None, "running")
        ]
        assert conn.execute("SELECT run_id, step FROM steps").fetchall() == [(run_id, 1)]
        assert conn.execute("SELECT run_id, step FROM checkpoint_events").fetchall() == [
            (run_id, 1)
        ]
        assert conn.execute("SELECT count(*) FROM memory").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM run_outcomes").fetchone() == (0,)
    finally:
        conn.close()
    with Store.open(path, upgrade=False) as store:
        store.checkpoint_step(run_id, StepRecord(2, "second", "ok", "", "", 5))
        store.finish_run(run_id, "success")
        assert store.last_step(run_id) == 2
        assert store.outcome(run_id) == "success"


@pytest.mark.slow
def test_upgrade_of_a_locked_store_is_refused_cleanly(
    tmp_path: Path, workers: list[Worker]
) -> None:
    """An io-harness process holds its store's write lock for 8 s while harness_store tries to
    upgrade it — a 0.11 store (rollback journal: the upgrade must first switch it to WAL) and
    a 0.12 one (already WAL). `Store.open` gets `StoreLockedError` after about the busy
    timeout; the `alembic` command exits non-zero with a last line saying the store is locked;
    each store is left as it was and is not corrupt.

    All four upgrades run at once in their own processes, started together by a file barrier
    once the four locks are held, so the hold outlasts the busy timeout whatever the start-up
    time of the processes."""
    paths: dict[str, Path] = {}
    before: dict[str, tuple[object, object]] = {}
    for release in ("0.11", "0.12"):
        original = tmp_path / f"original-{release}.sqlite3"
        legacy.build_lineage(original, release)
        conn = connect(original)
        shape = (legacy.table_shapes(conn), legacy.dump(conn, typed=True))
        conn.close()
        for mode in ("store", "alembic"):
            name = f"{mode}-{release}"
            paths[name] = tmp_path / f"{name}.sqlite3"
            shutil.copyfile(original, paths[name])
            before[name] = shape
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    upgraders = {
        name: Worker.script("upgrader.py", name.split("-")[0], path, barrier, name)
        for name, path in paths.items()
    }
    workers += upgraders.values()
    for name in paths:
        assert wait_for_file(barrier / f"ready-{name}", timeout=60), upgraders[name].stderr
    holders = {
        name: Worker.script("lock_holder.py", path, UPGRADE_HOLD_SECONDS)
        for name, path in paths.items()
    }
    workers += holders.values()
    for holder in holders.values():
        holder.wait_line("locked")
    (barrier / "go").touch()
    began = time.monotonic()

    problems = []
    for name, upgrader in upgraders.items():
        code = upgrader.finish(timeout=UPGRADE_HOLD_SECONDS + 30)
        seconds = time.monotonic() - began
        if name.startswith("store"):
            found = [line.split() for line in upgrader.lines if line.startswith("error ")]
            error, waited = (found[0][1], float(found[0][2])) if found else (upgrader.lines, 0.0)
            if error != "harness_store.errors.StoreLockedError":
                problems.append(f"{name}: Store.open raised {error}, not StoreLockedError")
            if not BUSY_TIMEOUT_SECONDS - 1.0 <= waited < UPGRADE_HOLD_SECONDS - 0.2:
                problems.append(
                    f"{name}: gave up after {waited:.2f}s, not ~{BUSY_TIMEOUT_SECONDS}s"
                )
        else:
            last = (upgrader.stderr.strip().splitlines() or [""])[-1]
            if code == 0 or "locked" not in last:
                problems.append(f"{name}: exit {code}, last line {last!r}")
            if seconds >= UPGRADE_HOLD_SECONDS - 0.2:
                problems.append(f"{name}: the command waited for the holder ({seconds:.1f}s)")
    for name, holder in holders.items():
        assert holder.finish(timeout=UPGRADE_HOLD_SECONDS + 10) == 0, holder.stderr
        integrity_ok(paths[name])
        conn = connect(paths[name])
        try:
            shapes, rows = before[name]
            assert legacy.table_shapes(conn) == shapes, f"{name}: the store must be untouched"
            assert legacy.dump(conn, typed=True) == rows, name
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            assert "alembic_version" not in tables, name
        finally:
            conn.close()
    assert not problems, "\n".join(problems)


# --- two threads upgrading two stores at once -----------------------------------------------


def open_at_once(path: Path, barrier: threading.Barrier) -> object:
    barrier.wait()
    with Store.open(path) as store:
        return store.upgrade_report.after  # type: ignore[attr-defined]


@pytest.mark.slow
def test_two_threads_upgrade_two_stores_at_once(tmp_path: Path) -> None:
    """`Store` is safe to share between threads; an application opening two *different* old
    stores from two threads at the same moment must get two upgraded stores — each upgrade
    whole, on its own file, with one backup each."""
    original = tmp_path / "original.sqlite3"
    legacy.build_lineage(original, "0.11")
    conn = connect(original)
    shapes, rows = legacy.table_shapes(conn), legacy.dump(conn, typed=True)
    conn.close()
    problems: list[str] = []
    for round_ in range(RACE_ROUNDS):
        paths = [tmp_path / f"round{round_}-{i}.sqlite3" for i in range(2)]
        for path in paths:
            shutil.copyfile(original, path)
        barrier = threading.Barrier(len(paths))
        results = attempt_all({str(p): (lambda p=p, b=barrier: open_at_once(p, b)) for p in paths})
        for path in paths:
            outcome, _ = results[str(path)]
            if outcome != HEAD:
                problems.append(f"round {round_}, {path.name}: {outcome!r}")
            made = sorted(tmp_path.glob(path.name + ".*.bak"))
            if len(made) != 1:
                problems.append(f"round {round_}, {path.name}: {len(made)} backups")
            conn = connect(path)
            try:
                version = conn.execute(
                    "SELECT name FROM sqlite_master WHERE name = 'alembic_version'"
                ).fetchall()
                stray = indexes(conn) if not version else []
                if stray:
                    problems.append(f"round {round_}, {path.name}: half upgraded, has {stray}")
                columns = {t: [c[0] for c in cs] for t, cs in shapes.items()}
                if legacy.dump(conn, columns, typed=True) != rows:
                    problems.append(f"round {round_}, {path.name}: rows changed")
            finally:
                conn.close()
    assert not problems, "\n".join(problems)


# --- two processes upgrading the same store at once ------------------------------------------


@pytest.fixture(scope="module")
def big_0_1(tmp_path_factory: pytest.TempPathFactory) -> BigStore:
    """A 0.1-born store with 50k more steps."""
    return make_big_store(tmp_path_factory.mktemp("race-0.1"), "0.1")


MIGRATION_STEP = re.compile(r"Running upgrade ([^\s,]*) -> ([^\s,]+)")


@pytest.mark.slow
@pytest.mark.parametrize(
    "modes", [("store", "store"), ("alembic", "alembic"), ("store", "alembic")], ids="-".join
)
def test_two_processes_upgrade_the_same_store(
    tmp_path: Path, workers: list[Worker], big_0_1: BigStore, modes: tuple[str, str]
) -> None:
    """Two processes start upgrading the same 50k-step 0.1 store at the same instant (a file
    barrier): one upgrades, the other waits on the lock and finds the work done. Neither fails,
    every step runs exactly once, one `alembic_version` row = head, rows intact."""
    path = tmp_path / "runs.sqlite3"
    shutil.copyfile(big_0_1.path, path)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    racers = [
        Worker.script("upgrader.py", mode, path, barrier, f"{mode}{i}")
        for i, mode in enumerate(modes)
    ]
    workers += racers
    for i, mode in enumerate(modes):
        assert wait_for_file(barrier / f"ready-{mode}{i}", timeout=60), racers[i].stderr
    (barrier / "go").touch()
    steps: list[tuple[str, str]] = []
    for racer in racers:
        assert racer.finish(timeout=120) == 0, racer.stderr
        assert racer.lines and racer.lines[-1].startswith("done"), racer.stderr
        steps += MIGRATION_STEP.findall(racer.stderr)
    chain = list(zip(("", *REVISIONS[:-1]), REVISIONS, strict=True))
    applied = sorted(set(steps), key=steps.index)
    assert len(steps) == len(applied), f"a migration step ran twice: {steps}"
    assert set(applied) <= set(chain)
    assert ("0.64", "0.65") in applied
    stamps = sum(racer.stderr.count("stamped at ") for racer in racers)
    assert stamps == 1, "exactly one process stamps the untracked store"
    assert whole_revision(path, big_0_1) == "head"
    conn = connect(path)
    try:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD,)]
        for table, columns in legacy.column_names(conn).items():
            assert len(columns) == len(set(columns)), table
        assert indexes(conn) == big_0_1.head_indexes
    finally:
        conn.close()
    for backup in tmp_path.glob("*.bak"):
        assert whole_revision(backup, big_0_1) in ("original", "head")
    # Neither process may have left work undone for a third.
    done = subprocess.run(alembic_argv(path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert MIGRATION_STEP.findall(done.stderr) == []
