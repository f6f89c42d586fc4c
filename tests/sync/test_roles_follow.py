"""A two-host fleet on a PostgreSQL centre with roles, run as its hosts run it: the roles made
by `harness-store roles`, each host's store written by a live writer process and followed by
its own `harness-store sync --follow` process logged in as its own follower role (one through
the URL, one through libpq's `PGUSER`), and a third follower, of the wrong role, refused the
other host's store while both go on. Every condition is an event (a line a process printed, the
centre found to mirror a source by polling until a generous deadline), never a time measured.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url
from support.clirun import run_cli
from support.pg_roles import as_role, run_sql
from support.processes import Worker, worker_argv
from support.synccheck import mirror_problems, write_source

from harness_store import StepRecord, Store

DEADLINE = 300.0
"""Seconds to wait for an event before the test fails (a loaded machine is slow, not wrong)."""

STARTED: list[Worker] = []
"""Every process the test started, killed after it (a failed test leaves none running)."""


@pytest.fixture(autouse=True)
def reaped() -> Iterator[None]:
    yield
    while STARTED:
        STARTED.pop().kill()


def started(argv: list[str]) -> Worker:
    worker = Worker(argv)
    STARTED.append(worker)
    return worker


def follower(
    source: Path, dest: str, *, env: dict[str, str] | None = None, json_out: bool = True
) -> Worker:
    """`harness-store sync --follow SOURCE DEST` in its own process, with `env` added to its
    environment (through `env(1)`, which execs the command: signals reach it)."""
    prefix = ["env", *(f"{k}={v}" for k, v in (env or {}).items())] if env else []
    argv = [sys.executable, "-m", "harness_store.cli", "sync", "--follow", str(source), dest]
    return started([*prefix, *argv, *(["--json"] if json_out else [])])


def events(worker: Worker, kind: str) -> list[dict[str, Any]]:
    found = [json.loads(line) for line in list(worker.lines) if line.startswith("{")]
    return [e for e in found if e["event"] == kind]


def wait_event(worker: Worker, what: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The next JSON line of `worker` that `what` holds for."""
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            line = worker.wait_line("{", max(0.1, deadline - time.monotonic()))
        except AssertionError as exc:
            said = "\n".join(worker.lines[-20:])
            raise AssertionError(f"{exc}\nlast lines:\n{said}\n{worker.stderr}") from None
        event: dict[str, Any] = json.loads(line)
        if what(event):
            return event


def sent_from(source: Path) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["event"] == "pass" and e["source"] == str(source) and e["rows"] > 0


def until(condition: Callable[[], Any], what: str) -> Any:
    """Poll `condition` until it is true (its value) or the hang bound runs out."""
    deadline = time.monotonic() + DEADLINE
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.2)


def caught_up(dest: str, source: Path) -> None:
    """Poll until the centre holds exactly the source's rows."""
    deadline = time.monotonic() + DEADLINE
    while problems := mirror_problems(dest, source):
        assert time.monotonic() < deadline, problems[:5]
        time.sleep(0.2)


def stop(worker: Worker) -> int:
    """SIGTERM, as `systemctl stop` sends; the exit code."""
    os.kill(worker.proc.pid, signal.SIGTERM)
    return worker.finish(timeout=DEADLINE)


def grow(path: Path, tag: str) -> None:
    """One more run of three steps, written by a Store of this process."""
    with Store.open(path) as store:
        run = store.start_run(f"goal {tag}", f"/src/{tag}.rs")
        store.checkpoint_steps(run, [StepRecord.new(i, f"{tag} {i}", "ok") for i in (1, 2, 3)])


def owners(pg_url: str, source: Path) -> tuple[list[str], set[str]]:
    """The role(s) the origin of `source` is bound to, and the roles its central runs belong to."""
    path = {"p": str(source.resolve())}
    bound = run_sql(
        pg_url,
        "SELECT r.role FROM hs_sync_origin_roles r JOIN hs_sync_origins o ON o.id = r.origin_id "
        "WHERE o.path = :p",
        path,
    )
    runs = run_sql(
        pg_url,
        "SELECT DISTINCT coalesce(rr.role, '(the owner)') FROM hs_sync_ids i "
        "JOIN hs_sync_origins o ON o.id = i.origin_id "
        "LEFT JOIN hs_sync_row_roles rr ON rr.tbl = 'runs' AND rr.row_id = i.dest_id "
        "WHERE i.tbl = 'runs' AND i.dest_id IS NOT NULL AND o.path = :p",
        path,
    )
    return [r[0] for r in bound], {r[0] for r in runs}


@pytest.mark.slow
def test_two_hosts_follow_through_the_command_each_as_its_own_role(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    a, b = new_role(), new_role()
    for role in (a, b):
        made = run_cli("roles", pg_url, "--follower", role)
        assert (made.returncode, made.stdout, made.stderr) == (0, f"{role}: follower\n", "")
    host_a, host_b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    write_source(host_a, runs=2, steps=3, tag="a")  # what each host held before following
    write_source(host_b, runs=2, steps=3, tag="b")
    hosts = (host_a, host_b)
    # host A's role in the URL; host B's from libpq's environment, the URL naming no user
    follow_a = follower(host_a, as_role(pg_url, a))
    no_user = make_url(pg_url)._replace(username=None, password=None)  # `set` keeps a None
    follow_b = follower(host_b, no_user.render_as_string(hide_password=False), env={"PGUSER": b})
    for worker, host in ((follow_a, host_a), (follow_b, host_b)):
        wait_event(worker, sent_from(host))
    stop_file = tmp_path / "stop"  # then each host's writer writes 20 runs of 10 steps
    writers = [started(worker_argv("follow_writer.py", h, stop_file, 40, 200)) for h in hosts]
    for w in writers:
        w.wait_line("ready", DEADLINE)
    for worker, host in ((follow_a, host_a), (follow_b, host_b)):
        wait_event(worker, sent_from(host))  # sent while its writer writes

    # role A following host B's store: refused it, said in one line; nothing of B's touched
    intruder = follower(host_b, as_role(pg_url, a), json_out=False)
    refusal = f"{host_b}: refused until it changes: "
    (said,) = until(
        lambda: [line for line in intruder.stderr.splitlines() if line.startswith(refusal)],
        "the intruding follower said its refusal",
    )
    reason = said.removeprefix(refusal)
    assert re.fullmatch(f"origin [0-9a-f-]{{36}} belongs to role {b}, not to role {a}", reason)
    once = run_cli("sync", host_b, as_role(pg_url, a))  # a one-shot sync: exit 1, one line
    assert once.returncode == 1 and f"  {host_b}: refused: {reason}" in once.stdout.splitlines()
    assert once.stderr == f"harness-store: error: {host_b} was not synced: {reason}\n"
    assert follow_a.proc.poll() is None and follow_b.proc.poll() is None
    grow(host_b, "after the refusal")  # host B's follower goes on sending: caught up below
    assert stop(intruder) == 0, intruder.stderr
    assert re.fullmatch(
        r"followed 0 stores into \S+ for \d+ s: 0 rows in 0 passes", intruder.lines[-1]
    )
    assert [line for line in intruder.stderr.splitlines() if line.startswith(refusal)] == [said]
    assert "Traceback" not in intruder.stderr

    for w in writers:  # every run each writer wrote reaches the centre, mirrored exactly
        w.wait_line("idle", DEADLINE)
    stop_file.touch()
    for w in writers:
        w.wait_line("done", DEADLINE)
        assert w.finish(timeout=DEADLINE) == 0, w.stderr
    caught_up(pg_url, host_a)
    caught_up(pg_url, host_b)
    assert owners(pg_url, host_a) == ([a], {a})
    assert owners(pg_url, host_b) == ([b], {b})
    origins = "SELECT o.path, r.role FROM hs_sync_origins o LEFT JOIN hs_sync_origin_roles r " \
        "ON r.origin_id = o.id ORDER BY o.path"  # fmt: skip
    assert run_sql(pg_url, origins) == [(str(host_a.resolve()), a), (str(host_b.resolve()), b)]

    for worker in (follow_a, follow_b):
        assert worker.proc.poll() is None, worker.stderr
        assert stop(worker) == 0, worker.stderr
        assert "Traceback" not in worker.stderr
        (summary,) = events(worker, "summary")
        passes = events(worker, "pass")
        assert summary["rows"] == sum(p["rows"] for p in passes) > 0
        assert summary["sent"] == sum(1 for p in passes if p["rows"])
    assert mirror_problems(pg_url, host_a) == [] and mirror_problems(pg_url, host_b) == []
