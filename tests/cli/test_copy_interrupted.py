"""`harness-store copy` stopped part way (SIGKILL, SIGTERM, SIGHUP, real signals to a real
process) and copies of a newer io-harness's stores: an unfinished target is recognisable,
refused by every reader, and redone by `--replace`/`--resume`; tables a 0.13 copy cannot carry
are named, not dropped silently."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect, text
from support.clirun import COMMAND, environ, run_cli, run_in_process, step_store
from support.processes import default_signals
from support.shared import FIXTURES, fixture_missing
from support.tiers import sampled

from harness_store import Store
from harness_store.dialects.postgresql import UPGRADE_LOCK
from harness_store.transfer import COPY_MARKER, IncompleteCopyError

STEPS = 50_000
"""The big source's steps: a copy 50 rows a batch is 1,000 batches, seconds of writing
against the tests' polls every 10 ms for the moment to stop it. A copy that ended before
a stop meant to end it fails its test (its marker gone, its exit code 0): too small a store
cannot pass a test, only fail it."""


@pytest.fixture(scope="module")
def big_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store whose copy, 50 rows a batch, takes long enough to be stopped part way."""
    return step_store(tmp_path_factory.mktemp("copy") / "source.sqlite3", STEPS)


def has_marker(path: Path) -> bool:
    if not path.exists():
        return False
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as conn:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = ?", (COPY_MARKER,)
            ).fetchall()
            return bool(found)
    except sqlite3.DatabaseError:
        return False


def copy_stopped_by(source: Path, target: Path, sig: signal.Signals) -> subprocess.Popen[str]:
    """Start a copy, wait until its rows are being written (the marker is committed), send
    `sig`, and return the finished process."""
    proc = subprocess.Popen(
        [*COMMAND, "copy", str(source), str(target), "--batch-size", "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ(),
        preexec_fn=default_signals,
    )
    while not has_marker(target):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(sig)
    proc.wait(timeout=120)
    return proc


def stop_signals(*names: str) -> list[Any]:
    """The signals as parameters: the first in the default tier, the others in the slow tier
    (copy takes every stop signal at one handler)."""
    return sampled([signal.Signals[f"SIG{n}"] for n in names], keep=1, ids=list(names))


def test_a_killed_copy_is_refused_everywhere_until_replaced(
    big_source: Path, tmp_path: Path
) -> None:
    target = tmp_path / "target.sqlite3"
    proc = copy_stopped_by(big_source, target, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    assert has_marker(target)
    for command in (["inspect"], ["runs"], ["trace", "1"]):  # what they say: no process needed
        done = run_in_process(command[0], target, *command[1:])
        assert done.returncode == 3, done.stderr
        assert "unfinished copy" in done.stderr and "--replace" in done.stderr
    with pytest.raises(IncompleteCopyError):
        Store.open(target)
    with pytest.raises(IncompleteCopyError):
        Store.open(target, read_only=True)
    again = run_cli("copy", big_source, target, timeout=600)
    assert again.returncode == 3 and "unfinished copy" in again.stderr
    redone = run_cli("copy", big_source, target, "--replace", "--json", timeout=600)
    assert redone.returncode == 0, redone.stderr
    assert json.loads(redone.stdout)["counts"]["steps"] == STEPS
    assert not has_marker(target)
    assert (
        json.loads(run_in_process("inspect", target, "--json").stdout)["tables"]["steps"] == STEPS
    )


def test_resume_continues_a_killed_copy(big_source: Path, tmp_path: Path) -> None:
    target = tmp_path / "target.sqlite3"
    copy_stopped_by(big_source, target, signal.SIGKILL)
    done = run_cli("copy", big_source, target, "--resume", timeout=600)
    assert done.returncode == 0, done.stderr
    with Store.open(target, read_only=True) as store:
        assert store.last_step(1) == STEPS


@pytest.mark.parametrize("sig", stop_signals("TERM", "HUP"))
def test_a_terminated_copy_empties_its_target(
    big_source: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    target = tmp_path / "target.sqlite3"
    proc = copy_stopped_by(big_source, target, sig)
    _, err = proc.communicate()
    assert proc.returncode == 1, err
    assert f"stopped by {sig.name}" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # the file the copy created is gone again
    assert run_cli("copy", big_source, target, timeout=600).returncode == 0


STOP_INSIDE_SQLALCHEMY = """
import os, signal, sqlite3, sys
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import Pool
from harness_store.cli import main
from harness_store.transfer import COPY_MARKER

sig, target, after_commit = signal.Signals[sys.argv[1]], sys.argv[2], sys.argv[3] == "1"
sent = False

def marked():
    if not os.path.exists(target):
        return False
    with sqlite3.connect(f"file:{target}?mode=ro", uri=True) as conn:
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (COPY_MARKER,))
        return bool(found.fetchall())

seen_marker = False

def stop_here(*args):
    global sent, seen_marker
    seen_marker = seen_marker or marked()
    if not sent and seen_marker and (marked() != after_commit):
        sent = True
        os.kill(os.getpid(), sig)

event.listen(Engine, "begin", stop_here)  # a connection beginning a transaction
event.listen(Pool, "reset", stop_here)  # a connection given back to the pool

main(["copy", *sys.argv[4:]])
"""
"""`harness-store copy` with a signal sent to itself from inside SQLAlchemy: at the first
transaction's begin, or connection's reset in the pool, that sees the unfinished-copy mark
committed (or, waiting until the rows are committed, the first that sees it gone again). argv
is the signal's name, the target, whether to wait until the rows are committed, then the copy's
arguments. The copy's target keeps one connection from the mark to the rows' commit, so the
first moment is the begin of the transaction the rows are written in; the second, the first
begin or reset after that transaction's commit."""


@pytest.mark.parametrize("sig", stop_signals("INT", "TERM"))
def test_a_stop_inside_sqlalchemy_is_taken_at_the_next_batch(
    big_source: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    """A stop arriving inside SQLAlchemy (as the copy's connection begins the transaction of
    its rows, right after the unfinished-copy mark is committed) is acted on at the copy's
    next batch: SQLAlchemy is not interrupted, so nothing logs it, and the target is emptied
    again."""
    target = tmp_path / "target.sqlite3"
    copying = [str(big_source), str(target), "--batch-size", "50"]
    done = subprocess.run(
        [sys.executable, "-c", STOP_INSIDE_SQLALCHEMY, sig.name, str(target), "0", *copying],
        capture_output=True,
        text=True,
        env=environ(),
        preexec_fn=default_signals,
        timeout=600,
    )
    name = "Ctrl-C" if sig == signal.SIGINT else sig.name
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        f"harness-store: error: copy stopped by {name}; the target was emptied again\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_stop_after_the_commit_keeps_the_finished_copy(big_source: Path, tmp_path: Path) -> None:
    """SIGTERM once the rows are committed (the mark is gone) stops nothing: the copy is
    whole, so it is reported and kept, and the late signal is said on stderr."""
    target = tmp_path / "target.sqlite3"
    copying = [str(big_source), str(target), "--json"]
    done = subprocess.run(
        [sys.executable, "-c", STOP_INSIDE_SQLALCHEMY, "SIGTERM", str(target), "1", *copying],
        capture_output=True,
        text=True,
        env=environ(),
        preexec_fn=default_signals,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["counts"]["steps"] == STEPS
    assert done.stderr == (
        "SIGTERM arrived after the last batch; the copy was committed and is whole\n"
    )
    with Store.open(target, read_only=True) as store:
        assert store.last_step(1) == STEPS


def test_a_copy_into_postgresql_stopped_mid_copy_leaves_it_empty(
    big_source: Path, pg_url: str
) -> None:
    """SIGTERM while the rows stream into PostgreSQL through COPY: the COPY is ended and rolled
    back, the schema dropped again, and the command says only that it stopped."""
    engine = create_engine(pg_url)
    try:
        proc = subprocess.Popen(
            [*COMMAND, "copy", str(big_source), pg_url, "--batch-size", "50"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environ(),
            preexec_fn=default_signals,
        )
        copying = text(  # this test's database: other tests' syncs COPY into "steps" too
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'COPY \"steps\"%'"
        )
        with engine.connect() as watcher:
            while not watcher.execute(copying).scalar():
                watcher.rollback()  # pg_stat_activity is read once a transaction
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err
        *finished, last = err.splitlines()  # the tables copied before it, then the stop
        assert last == "harness-store: error: copy stopped by SIGTERM; the target was emptied again"
        assert all(re.fullmatch(r"\w+: [\d,]+/[\d,]+ rows", line) for line in finished), err
        assert inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_a_signal_the_caller_ignores_stays_ignored(big_source: Path, tmp_path: Path) -> None:
    """Under `nohup` (SIGHUP ignored, as for a background job's SIGINT) the copy does not take
    the signal back: a hangup leaves it running to the end."""
    target = tmp_path / "target.sqlite3"
    proc = subprocess.Popen(
        [*COMMAND, "copy", str(big_source), str(target), "--batch-size", "50", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ(),
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),  # as nohup does
    )
    while not has_marker(target):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert json.loads(out)["counts"]["steps"] == STEPS


def test_a_second_signal_stops_a_copy_that_is_waiting(big_source: Path, pg_url: str) -> None:
    """A copy waiting for another upgrader of its PostgreSQL target has no next batch to stop
    at: the first signal is kept for it, a second one stops it at once. Nothing was built."""
    lock = f"SELECT pg_advisory_xact_lock({UPGRADE_LOCK[0]}, {UPGRADE_LOCK[1]})"
    engine = create_engine(pg_url)
    try:
        with engine.connect() as holder, holder.begin():
            holder.execute(text(lock))
            proc = subprocess.Popen(
                [*COMMAND, "copy", str(big_source), pg_url],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=environ(),
                preexec_fn=default_signals,
            )
            waiting = text(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            )
            with engine.connect() as watcher:
                while not watcher.execute(waiting).scalar():
                    assert proc.poll() is None, proc.communicate()
                    time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)  # two kinds: two of one kind may arrive as one
            proc.send_signal(signal.SIGHUP)
            _, err = proc.communicate(timeout=60)  # with the lock still held
        assert proc.returncode == 1, err
        stopped = "harness-store: error: copy stopped by {}; the target was emptied again\n"
        assert err in {stopped.format("SIGTERM"), stopped.format("SIGHUP")}
        assert inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_replace_refuses_a_target_with_rows(big_source: Path, tmp_path: Path) -> None:
    target = step_store(tmp_path / "full.sqlite3", 3)
    done = run_cli("copy", big_source, target, "--replace", timeout=600)
    assert done.returncode == 3 and "not empty" in done.stderr
    with Store.open(target, read_only=True) as store:
        assert store.last_step(1) == 3


def test_newer_tables_are_named_unless_skipped(tmp_path: Path) -> None:
    """A table no release up to 0.66 has (an io-harness newer than this package) is named."""
    fixture = FIXTURES / "io-harness-0.22.0" / "populated.sqlite3"
    if not fixture.exists():
        fixture_missing(fixture)
    source = tmp_path / "newer.sqlite3"
    source.write_bytes(fixture.read_bytes())
    Store.open(source, backup=False).close()  # the whole 0.66 schema, plus the table below
    with closing(sqlite3.connect(source)) as conn, conn:
        conn.execute("CREATE TABLE future_things (id INTEGER PRIMARY KEY, note TEXT)")
        conn.execute("INSERT INTO future_things (note) VALUES ('from 0.99')")
    target = tmp_path / "copy.sqlite3"
    done = run_cli("copy", source, target, timeout=600)
    assert done.returncode == 3, done.stderr
    assert "future_things" in done.stderr and "--skip-unknown-tables" in done.stderr
    assert not target.exists()
    skipped = run_cli("copy", source, target, "--skip-unknown-tables", "--json", timeout=600)
    assert skipped.returncode == 0, skipped.stderr
    assert json.loads(skipped.stdout)["skipped_tables"] == {"future_things": 1}
