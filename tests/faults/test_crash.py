"""Crashes with real processes: SIGKILL at random moments, then prove nothing is lost or torn.

Every worker here is a separate Python process (`tests/workers/`) killed with SIGKILL — no
`finally`, no `atexit`, no rollback by Python; whatever SQLite has not committed is discarded by
its own recovery the next time the file is opened. Kill moments come from `random.Random`
seeded with `SEED`, so a run is repeatable in its choices (the timing of the OS is not).

Kills across this module: 2 × `CHECKPOINT_KILLS` writers, `MEMORY_KILLS` memory writers,
`FINISH_KILLS` finishers (these never end on their own, so every one is a real kill), plus the
upgrade trials (an upgrade may finish before its kill lands; both outcomes are checked).
"""

from __future__ import annotations

import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from support import legacy
from support.big_stores import BigStore, make_big_store, whole_revision
from support.processes import Worker, alembic_argv
from support.sqlite_files import connect, integrity_ok
from workers.checkpoint_writer import step_record
from workers.finisher import plan_for
from workers.memory_writer import WORKSPACES, put_for

from harness_store import StepRecord, Store
from harness_store.formats import (
    MEMORY_MAX_CHARS,
    MEMORY_MAX_ENTRIES,
    MEMORY_MAX_ENTRY_CHARS,
    MEMORY_TRUNCATED,
)
from harness_store.releases import HEAD

SEED = 20_240_611
CHECKPOINT_KILLS = 16  # per synchronous mode: 32 in all
MEMORY_KILLS = 10
MEMORY_PREFILL = 150  # puts made before the kills: both caps are reached
FINISH_KILLS = 10
UPGRADE_TRIALS = 5  # per upgrade path (alembic command, Store.open)


def acknowledged(worker: Worker, previous: int) -> int:
    """The last number the worker acknowledged (or `previous` when it acknowledged none),
    checking the acknowledgements themselves run on from `previous` without gaps."""
    numbers = worker.numbers()
    assert numbers == list(range(previous + 1, previous + 1 + len(numbers))), numbers[:20]
    return numbers[-1] if numbers else previous


def sleep_kill(worker: Worker, rng: random.Random, *, startup: float, window: float) -> None:
    """Kill `worker` at a random moment: during start-up and `Store.open` one time in five,
    otherwise within `window` seconds of its `ready` line (while it writes)."""
    if rng.random() < 0.2:
        time.sleep(rng.uniform(0.0, startup))
    else:
        worker.wait_line("ready")
        time.sleep(rng.uniform(0.0, window))
    worker.kill()
    assert worker.killed, f"worker ended by itself ({worker.proc.returncode}):\n{worker.stderr}"


# --- checkpoint_step -----------------------------------------------------------------------


def verify_checkpoints(path: Path, run_id: int, check_rows_from: int) -> int:
    """The store opens; steps are 1..N with no gap or duplicate; each step has exactly one
    checkpoint event and each event its step; rows are intact. Returns N, the last step."""
    with Store.open(path, upgrade=False) as store:
        last = store.last_step(run_id)
        records = list(store.iter_steps(run_id)) if check_rows_from == 0 else None
    conn = connect(path)
    try:
        steps = [
            r[0]
            for r in conn.execute("SELECT step FROM steps WHERE run_id = ? ORDER BY id", (run_id,))
        ]
        if records is None:
            records = [
                StepRecord(*r)
                for r in conn.execute(
                    "SELECT step, decision, result, prompt, tool_call, tokens FROM steps "
                    "WHERE run_id = ? AND step > ? ORDER BY id",
                    (run_id, check_rows_from),
                )
            ]
        events = conn.execute(
            "SELECT step, kind, detail FROM checkpoint_events WHERE run_id = ? ORDER BY id",
            (run_id,),
        ).fetchall()
        orphans = conn.execute(
            "SELECT (SELECT count(*) FROM steps s WHERE NOT EXISTS (SELECT 1 FROM "
            "checkpoint_events c WHERE c.run_id = s.run_id AND c.step = s.step)), "
            "(SELECT count(*) FROM checkpoint_events c WHERE NOT EXISTS (SELECT 1 FROM "
            "steps s WHERE c.run_id = s.run_id AND c.step = s.step))"
        ).fetchone()
        quick = conn.execute("PRAGMA quick_check").fetchall()
    finally:
        conn.close()
    assert steps == list(range(1, len(steps) + 1)), "steps must be contiguous, no duplicates"
    assert events == [(s, "checkpoint", None) for s in steps], "one checkpoint event per step"
    assert orphans == (0, 0)
    assert quick == [("ok",)]
    assert last == len(steps)
    assert records == [step_record(s) for s in steps[check_rows_from:]], "rows intact"
    return last


@pytest.mark.slow
@pytest.mark.parametrize("synchronous", ["default", "normal"])
def test_checkpoint_writer_killed_at_random_moments(tmp_path: Path, synchronous: str) -> None:
    """A writer checkpointing steps in a loop, SIGKILLed `CHECKPOINT_KILLS` times.

    The worker prints a step number only after `checkpoint_step` returned, i.e. after COMMIT.
    So every acknowledged step is in the store: `acknowledged ≤ last_step`. One more step can
    be committed but unacknowledged, so `last_step ≤ acknowledged + 1`: the kill can land
    after COMMIT returned and before the `print`/flush reached the pipe, or — far more often —
    inside COMMIT itself, after SQLite wrote the transaction's commit frame to the WAL file
    but before its fsync returned; the frame is in the OS's cache, so the transaction is
    durable although the caller never heard so. Never +2: the worker is sequential and does
    not begin step n+2 before it has printed n+1. With `synchronous=NORMAL` a kill (unlike a
    power cut) must lose nothing either, for the same reason.
    """
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run_id = store.start_run("checkpoint until killed", "out.txt")
    rng = random.Random(f"{SEED}:checkpoint:{synchronous}")
    last = 0
    for _ in range(CHECKPOINT_KILLS):
        worker = Worker.script("checkpoint_writer.py", path, run_id, synchronous)
        sleep_kill(worker, rng, startup=0.6, window=0.05)
        ready = [line for line in worker.lines if line.startswith("ready ")]
        if ready:
            assert ready == [f"ready {last}"], "the worker resumes after the last committed step"
        acked = acknowledged(worker, last)
        now = verify_checkpoints(path, run_id, check_rows_from=max(last - 1, 0))
        assert acked <= now <= acked + 1, (acked, now)
        last = now
    assert last > CHECKPOINT_KILLS, "the writer made progress between kills"
    verify_checkpoints(path, run_id, check_rows_from=0)
    integrity_ok(path)


# --- memory_put with evictions ---------------------------------------------------------------


def stored_value(intended: str) -> str:
    if len(intended) <= MEMORY_MAX_ENTRY_CHARS:
        return intended
    return intended[: MEMORY_MAX_ENTRY_CHARS - len(MEMORY_TRUNCATED)] + MEMORY_TRUNCATED


def verify_memory(path: Path, seed: int, acked: int) -> int:
    """Caps hold in every workspace, every value is exactly some put's (cut per upstream), no
    put newer than `acked + 1` is there, no value older than an acknowledged overwrite survives,
    and the last acknowledged put is there unless put `acked + 1` committed. Returns the
    highest put number present."""
    conn = connect(path)
    try:
        rows = conn.execute("SELECT workspace, key, value FROM memory ORDER BY id").fetchall()
        caps = conn.execute(
            "SELECT workspace, count(*), sum(length(value)) FROM memory GROUP BY workspace"
        ).fetchall()
        assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    for workspace, count, chars in caps:
        assert count <= MEMORY_MAX_ENTRIES, (workspace, count)
        assert chars <= MEMORY_MAX_CHARS, (workspace, chars)
    with Store.open(path, upgrade=False) as store:  # the store opens, and reads the same
        listed = {(w, e.key, e.value) for w in WORKSPACES for e in store.memory_list(w)}
    assert listed == set(rows)
    last_write: dict[tuple[str, str], int] = {}
    for i in range(1, acked + 1):
        workspace, key, _ = put_for(seed, i)
        last_write[(workspace, key)] = i
    present: dict[tuple[str, str], int] = {}
    for workspace, key, value in rows:
        assert workspace in WORKSPACES
        i = int(value[1 : value.index(":")])
        assert (workspace, key, value) == (*put_for(seed, i)[:2], stored_value(put_for(seed, i)[2]))
        assert len(value) <= MEMORY_MAX_ENTRY_CHARS
        assert i <= acked + 1, f"put {i} is there but only {acked} were acknowledged"
        if i <= acked:
            assert last_write[(workspace, key)] == i, f"put {i} survived a later overwrite"
        present[(workspace, key)] = i
    highest = max(present.values(), default=0)
    if acked:
        workspace, key, _ = put_for(seed, acked)
        if present.get((workspace, key)) != acked:
            assert highest == acked + 1, f"acknowledged put {acked} is missing"
    return highest


@pytest.mark.slow
def test_memory_put_killed_never_breaks_caps(tmp_path: Path) -> None:
    """`memory_put` upserts and evicts in one transaction: after any kill every workspace holds
    at most 64 entries and 16,000 characters, and the acknowledged writes are there."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run_id = store.start_run("memory writer", "m.txt")
    rng = random.Random(f"{SEED}:memory")
    # Fill the workspaces first (in this process), so every put from now on evicts.
    acked = MEMORY_PREFILL
    with Store.open(path, upgrade=False) as store:
        for i in range(1, acked + 1):
            workspace, key, value = put_for(SEED, i)
            store.memory_put(workspace, key, value, run_id, i % 1000)
    verify_memory(path, SEED, acked)
    for _ in range(MEMORY_KILLS):
        worker = Worker.script("memory_writer.py", path, run_id, SEED, acked + 1)
        sleep_kill(worker, rng, startup=0.6, window=0.15)
        acked = acknowledged(worker, acked)
        verify_memory(path, SEED, acked)
    assert acked > MEMORY_PREFILL + MEMORY_KILLS, "the writers made progress between kills"
    integrity_ok(path)


# --- finish_run with its summary -------------------------------------------------------------


def verify_finished(path: Path, seed: int, acks: dict[int, str]) -> None:
    """Each run is consistent: unfinished (no outcome, `running`, no summary), paused (no
    summary) or completed with a summary matching its outcome, steps and tokens. Every
    acknowledged finish is there."""
    conn = connect(path)
    try:
        runs = conn.execute(
            "SELECT r.id, r.goal, r.outcome, r.status, o.outcome, o.success, o.steps, o.tokens, "
            "o.finished_at, (SELECT coalesce(max(step), 0) FROM steps s WHERE s.run_id = r.id), "
            "(SELECT coalesce(sum(tokens), 0) FROM steps s WHERE s.run_id = r.id), "
            "(SELECT count(*) FROM checkpoint_events c WHERE c.run_id = r.id) "
            "FROM runs r LEFT JOIN run_outcomes o ON o.run_id = r.id ORDER BY r.id"
        ).fetchall()
        extra = conn.execute(
            "SELECT count(*) FROM run_outcomes WHERE run_id NOT IN (SELECT id FROM runs)"
        ).fetchone()
        assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    assert extra == (0,)
    with Store.open(path, upgrade=False) as store:  # the store opens, and reads the same
        read = {
            r[0]: (store.outcome(r[0]), getattr(store.run_summary(r[0]), "outcome", None))
            for r in runs
        }
    assert read == {r[0]: (r[2], r[4]) for r in runs}
    for run_id, goal, outcome, status, o_outcome, success, steps, tokens, at, mx, sm, ck in runs:
        planned_steps, planned = plan_for(seed, int(goal.split()[1]))
        assert ck == mx, f"run {run_id}: checkpoint_steps is all or nothing"
        assert mx in (0, planned_steps)
        if outcome is None:
            assert (status, o_outcome) == ("running", None), run_id
        elif outcome == "awaiting_approval":
            assert (status, o_outcome) == ("paused", None), run_id
        else:
            assert outcome in (planned, "success"), run_id
            assert status == "completed", run_id
            assert (o_outcome, success, steps, tokens) == (
                outcome,
                int(outcome == "success"),
                mx,
                sm,
            ), f"run {run_id}: summary must match the outcome and the steps"
            assert at is not None
        if run_id in acks:
            # An acknowledged pause may have been followed by its final finish, committed but
            # not acknowledged yet (the kill came after COMMIT, before the print).
            allowed = {acks[run_id]} | (
                {"success"} if acks[run_id] == "awaiting_approval" else set()
            )
            assert outcome in allowed, f"acknowledged finish of run {run_id} is lost"


@pytest.mark.slow
def test_finish_run_killed_leaves_outcome_and_summary_together(tmp_path: Path) -> None:
    """`finish_run` writes `runs` and `run_outcomes` in one transaction: after any kill a run
    has both its outcome and summary, or neither, and its status agrees."""
    path = tmp_path / "runs.sqlite3"
    Store.open(path).close()
    rng = random.Random(f"{SEED}:finish")
    done = 0
    acks: dict[int, str] = {}
    for _ in range(FINISH_KILLS):
        worker = Worker.script("finisher.py", path, SEED, done + 1)
        sleep_kill(worker, rng, startup=0.6, window=0.15)
        for line in worker.lines:
            if line[:1].isdigit():
                i, run_id, outcome = line.split()
                acks[int(run_id)] = outcome
                done = int(i)
        verify_finished(path, SEED, acks)
    assert len(acks) >= FINISH_KILLS, "the finishers made progress between kills"
    integrity_ok(path)


# --- upgrades killed -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def born_0_1(tmp_path_factory: pytest.TempPathFactory) -> BigStore:
    """A store born at 0.1 with `BULK_STEPS` more steps (crosses every release, WAL too)."""
    return make_big_store(tmp_path_factory.mktemp("born-0.1"), "0.1")


@pytest.fixture(scope="module")
def lineage_0_11(tmp_path_factory: pytest.TempPathFactory) -> BigStore:
    """A store grown by 0.1 … 0.11 (rows of every release) with `BULK_STEPS` more steps."""
    return make_big_store(tmp_path_factory.mktemp("lineage-0.11"), "0.11")


def calibrate(worker: Worker) -> float:
    """How long an unkilled run of `worker` takes, start-up included, in seconds."""
    assert worker.finish(timeout=120) == 0, worker.stderr
    return time.monotonic() - worker.started


@pytest.mark.slow
def test_alembic_upgrade_killed_at_random_moments(tmp_path: Path, born_0_1: BigStore) -> None:
    """`alembic upgrade head` on a 0.1-born store with 50k steps, SIGKILLed at random moments:
    the store is at a whole revision each time, and a second run completes with rows intact."""
    rng = random.Random(f"{SEED}:alembic")
    scratch = tmp_path / "scratch.sqlite3"
    shutil.copyfile(born_0_1.path, scratch)
    total = calibrate(Worker(alembic_argv(scratch)))
    states: list[str] = []
    for trial in range(UPGRADE_TRIALS):
        path = tmp_path / f"trial-{trial}.sqlite3"
        shutil.copyfile(born_0_1.path, path)
        worker = Worker(alembic_argv(path))
        # Mostly aim at the upgrade itself: the last ~60% of the command's life (start-up
        # and imports come first); sometimes anywhere.
        low = 0.0 if rng.random() < 0.25 else 0.4 * total
        time.sleep(rng.uniform(low, total * 1.05))
        worker.kill()
        state = whole_revision(path, born_0_1, typed=False)
        states.append(("killed " if worker.killed else "finished ") + state)
        again = subprocess.run(alembic_argv(path), capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        assert whole_revision(path, born_0_1, typed=trial == 0) == "head"
    assert any(s.startswith("killed") for s in states), states


@pytest.mark.slow
def test_store_open_upgrade_killed_at_random_moments(
    tmp_path: Path, lineage_0_11: BigStore
) -> None:
    """`Store.open` upgrading a 0.1…0.11 lineage store with 50k more steps, SIGKILLed at random
    moments after it starts: a whole revision each time; a second open completes, rows intact."""
    rng = random.Random(f"{SEED}:store-open")
    scratch = tmp_path / "scratch.sqlite3"
    shutil.copyfile(lineage_0_11.path, scratch)

    def start(path: Path) -> Worker:
        worker = Worker.script("opener.py", path)
        worker.wait_line("go")
        return worker

    calibration = start(scratch)
    began = time.monotonic()
    calibration.wait_line("opened", timeout=120)
    window = time.monotonic() - began  # from `go` to the upgrade's end, not the exit
    assert calibration.finish(timeout=60) == 0, calibration.stderr
    states: list[str] = []
    for trial in range(UPGRADE_TRIALS):
        path = tmp_path / f"trial-{trial}.sqlite3"
        shutil.copyfile(lineage_0_11.path, path)
        worker = start(path)
        time.sleep(rng.uniform(0.0, window * 1.05))
        worker.kill()
        state = whole_revision(path, lineage_0_11, typed=False)
        states.append(("killed " if worker.killed else "finished ") + state)
        again = Worker.script("opener.py", path)
        assert again.finish(timeout=120) == 0, again.stderr
        assert again.lines[-1] in (f"opened {HEAD}", "opened None")
        assert whole_revision(path, lineage_0_11, typed=trial == 0) == "head"
    assert any(s.startswith("killed") for s in states), states


# --- upgrade safety: the backup --------------------------------------------------------------


def backups(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.bak"))


def assert_backup_equals(backup: Path, big: BigStore) -> None:
    conn = connect(backup)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert legacy.table_shapes(conn) == big.shapes
        assert legacy.dump(conn, typed=True) == big.rows
        assert conn.execute("PRAGMA user_version").fetchone()[0] == big.user_version
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "alembic_version" not in tables
    finally:
        conn.close()


def test_store_open_takes_a_consistent_backup(tmp_path: Path, lineage_0_11: BigStore) -> None:
    path = tmp_path / "runs.sqlite3"
    shutil.copyfile(lineage_0_11.path, path)
    with Store.open(path) as store:
        backup = store.upgrade_report.backup  # type: ignore[attr-defined]
    assert backups(tmp_path) == [backup]
    assert_backup_equals(backup, lineage_0_11)
    assert whole_revision(path, lineage_0_11) == "head"
    # Already at head: nothing to do, no second backup.
    Store.open(path).close()
    assert backups(tmp_path) == [backup]


def test_store_open_without_backup_makes_none(tmp_path: Path, lineage_0_11: BigStore) -> None:
    path = tmp_path / "runs.sqlite3"
    shutil.copyfile(lineage_0_11.path, path)
    with Store.open(path, backup=False) as store:
        assert store.upgrade_report.backup is None  # type: ignore[attr-defined]
    assert backups(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        "runs.sqlite3"
    ]
    assert whole_revision(path, lineage_0_11) == "head"


@pytest.mark.parametrize("backup", [True, False])
def test_alembic_command_backup(tmp_path: Path, born_0_1: BigStore, backup: bool) -> None:
    path = tmp_path / "runs.sqlite3"
    shutil.copyfile(born_0_1.path, path)
    extra = () if backup else ("-x", "backup=no")
    done = subprocess.run(alembic_argv(path, *extra), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = backups(tmp_path)
    if backup:
        assert len(found) == 1
        assert_backup_equals(found[0], born_0_1)
    else:
        assert found == []
    assert whole_revision(path, born_0_1) == "head"


@pytest.mark.slow
def test_upgrade_killed_during_backup_leaves_no_misleading_backup(
    tmp_path: Path, born_0_1: BigStore
) -> None:
    """A kill while the pre-upgrade backup is being written: the store is untouched (the
    upgrade had not begun), and no file is left under a backup's name that is not a complete
    backup — a person restoring `<store>.<revision>-<stamp>.bak` must get the store back."""
    rng = random.Random(f"{SEED}:backup-kill")
    problems: list[str] = []
    for trial in range(3):
        directory = tmp_path / f"trial-{trial}"
        directory.mkdir()
        path = directory / "runs.sqlite3"
        shutil.copyfile(born_0_1.path, path)
        worker = Worker(alembic_argv(path))
        while not backups(directory) and worker.proc.poll() is None:
            time.sleep(0.0005)
        time.sleep(rng.uniform(0.0, 0.01))
        worker.kill()
        assert whole_revision(path, born_0_1, typed=False) in ("original", "head")
        left = sorted(p.name for p in directory.iterdir() if p.name.startswith(path.name + "."))
        for backup in backups(directory):
            conn = connect(backup)
            try:
                complete = legacy.dump(conn) == born_0_1.plain_rows
                tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            finally:
                conn.close()
            if not complete:
                problems.append(
                    f"trial {trial}: {backup.name} ({backup.stat().st_size} bytes, {tables} "
                    f"schema objects) is not a complete backup; left after the kill: {left}"
                )
    assert not problems, "\n".join(problems)
