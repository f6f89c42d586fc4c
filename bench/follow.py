"""Benchmark 14: `harness-store sync --follow` into PostgreSQL: how far behind its sources the
centre is, what the followers cost, and what an idle follower costs.

Every source is written by a writer process as io-harness writes (one `Store` kept open, runs of
ten steps, each step committed with its checkpoint marker) at a steady pace, each step's
decision holding the wall-clock time just before its commit. An observer polls the centre
every 20 ms for new steps: a step's delay is when the observer first sees it minus that time
(so each delay is over by at most one poll).

- 14a: 3 sources at 50 steps/s each, followed by one `sync --follow` process, side by side
  (same run, same sources' shape, a fresh database each) with one process running `sync` of
  the same 3 sources in a loop; the writers start once that process has made its first pass.
  Targets: follow's median delay ≤ 1 s, worst ≤ 3 s.
- 14b: 1, 5 and 20 follower processes (one source each, into one centre). Catch-up: the
  followers start while their sources are away, and once each has said it waits, the stores
  (each already holding steps) are put in place; rows/s until the centre holds them all,
  beside one `sync` of the same stores into a fresh database. Then live: each source written
  at 10 steps/s; the centre's delay, and each follower's CPU (its user+system time over the
  live window, from /proc).
- 14c: one follower of 3 sources that nothing writes: its CPU over a minute and its memory at
  the start and end of that minute. Target: ≤ 5 % of one CPU.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .common import Config, Table, fmt_rate, median, say, step_records
from .stores import pg_conninfo, pg_database

WRITER = """
import sys, time
from pathlib import Path
from harness_store import StepRecord, Store
path, stop, pace = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
with Store.open(path, synchronous="normal") as store:
    print("ready", flush=True)
    gap, at, n, run = 1.0 / pace, time.monotonic(), 0, None
    while not stop.exists():
        if run is None:
            run = store.start_run(f"live {n}", "/live.rs")
        step = n % 10 + 1
        store.checkpoint_step(run, StepRecord.new(step, repr(time.time()), "ok"))
        n += 1
        if step == 10:
            store.finish_run(run, "success")
            run = None
        at += gap
        time.sleep(max(0.0, at - time.monotonic()))
print("done", n, flush=True)
"""

LOOP = """
import sys
from harness_store.sync import sync
dest, sources = sys.argv[1], sys.argv[2:]
while True:  # until SIGTERM
    sync(sources, dest)
    print("synced", flush=True)
"""

LOOK_BACK = 10.0
"""Seconds a pass's rows may take from their ids to their commit, for the observer."""

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def python(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def follower(sources: list[Path], url: str) -> subprocess.Popen[str]:
    command = ["-m", "harness_store.cli", "sync", "--follow", *map(str, sources), url, "--json"]
    return python(*command)


class Lines:
    """A process's stdout read by a thread (so its pipe never fills); an event per word."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.seen: dict[str, threading.Event] = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def event(self, word: str) -> threading.Event:
        with self.lock:
            return self.seen.setdefault(word, threading.Event())

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            for word in ("synced", '"waiting"', '"pass"'):
                if word in line:
                    self.event(word).set()

    def wait(self, word: str, timeout: float = 600) -> None:
        assert self.event(word).wait(timeout), f"no {word} from {self.proc.args}"


def stop_all(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def writers(paths: list[Path], stop: Path, pace: float) -> Iterator[list[subprocess.Popen[str]]]:
    """One writer process per path, each ready (its store open) before the block runs; the
    stop file is made and each writer waited for after it."""
    stop.unlink(missing_ok=True)
    procs = [python("-c", WRITER, str(p), str(stop), str(pace)) for p in paths]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield procs
    finally:
        stop.touch()
        for proc in procs:
            proc.wait(timeout=120)


class Observer:
    """Polls the centre every 20 ms for new steps; the delay of each live step."""

    def __init__(self, url: Any) -> None:
        self.conninfo = pg_conninfo(url)
        self.delays: list[float] = []
        self.steps = 0
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        """New steps by id, each once. Concurrent passes commit their ids out of order, so
        each poll looks again above the highest id seen `LOOK_BACK` seconds ago (a pass
        commits sooner), leaving out the ids seen since."""
        import psycopg

        seen: set[int] = set()
        floors: list[tuple[float, int]] = []
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            while not self.halt.wait(0.02):
                now = time.monotonic()
                floor = max((i for t, i in floors if t <= now - LOOK_BACK), default=0)
                floors = [(t, i) for t, i in floors if t > now - 2 * LOOK_BACK] + [(now, 0)]
                recent = [i for i in seen if i > floor]
                try:
                    rows = conn.execute(
                        "SELECT id, decision FROM steps WHERE id > %s AND NOT (id = ANY(%s))",
                        (floor, recent),
                    ).fetchall()
                except psycopg.errors.UndefinedTable:
                    continue
                wall = time.time()
                for row_id, decision in rows:
                    seen.add(row_id)
                    self.steps += 1
                    if decision[:1].isdigit():  # not a step written before the live phase
                        self.delays.append(wall - float(decision))
                floors[-1] = (now, max(seen, default=0))
                seen = {i for i in seen if i > floor}

    def until(self, steps: int, timeout: float = 600) -> float:
        """Wait until the centre holds `steps` steps; the seconds waited."""
        start = time.monotonic()
        while self.steps < steps and time.monotonic() - start < timeout:
            time.sleep(0.02)
        return time.monotonic() - start

    def close(self) -> None:
        self.halt.set()
        self.thread.join(10)


def prefilled(cfg: Config, name: str, steps: int) -> Path:
    from harness_store import Store

    path = cfg.work / f"{name}.sqlite3"
    with Store.open(path, synchronous="off", backup=False) as store:
        for first in range(1, steps + 1, 100):
            run = store.start_run("bench", "src/parser.rs")
            store.checkpoint_steps(run, step_records(1, min(100, steps - first + 1)))
            store.finish_run(run, "success")
    return path


def written(procs: list[subprocess.Popen[str]]) -> int:
    total = 0
    for proc in procs:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("done"):
                total += int(line.split()[1])
    return total


def delays_row(table: Table, label: str, delays: list[float], cpu: float, seconds: float) -> None:
    ordered = sorted(delays)
    table.add(
        label,
        f"{median(ordered):.2f} s" if ordered else "—",
        f"{ordered[int(len(ordered) * 0.95)]:.2f} s" if ordered else "—",
        f"{ordered[-1]:.2f} s" if ordered else "—",
        f"{cpu / seconds * 100:.0f} %",
    )


def live_delay(cfg: Config, variant: str, seconds: float) -> tuple[list[float], float]:
    """14a's one variant: 3 sources at 50 steps/s; the delays and the syncing process's CPU."""
    assert cfg.pg is not None
    with pg_database(cfg.pg, f"hs_bench_follow_{variant.replace('-', '_')}") as url:
        from harness_store import Store

        Store.open(url).close()
        dest = url.render_as_string(hide_password=False)
        paths = [prefilled(cfg, f"live-{variant}-{n}", 1) for n in range(3)]
        stop = cfg.work / f"stop-{variant}"
        observer = Observer(url)
        if variant == "follow":
            syncing = follower(paths, dest)
            Lines(syncing).wait('"pass"')
        else:
            syncing = python("-c", LOOP, dest, *map(str, paths))
            Lines(syncing).wait("synced")
        with writers(paths, stop, 50) as procs:  # once the process is up and has synced
            start_cpu = cpu_seconds(syncing.pid)
            time.sleep(seconds)
            used = cpu_seconds(syncing.pid) - start_cpu
        total = written(procs)
        observer.until(total)
        stop_all([syncing])
        observer.close()
        for p in paths:
            p.unlink(missing_ok=True)
        return observer.delays, used


def run(cfg: Config) -> list[Table]:
    if not cfg.pg:
        say("follow: skipped (needs --pg)")
        return []
    seconds = cfg.pick(30.0, 8.0)
    live = Table(
        "14a. delay from a source's commit to the centre's, 3 sources × 50 steps/s",
        ["variant", "median", "p95", "worst", "CPU of one core"],
    )
    results: dict[str, tuple[list[float], float]] = {}
    for variant in ("follow", "sync-loop", "follow", "sync-loop")[: cfg.pick(4, 2)]:
        say(f"follow: 14a {variant}")
        delays, cpu = live_delay(cfg, variant, seconds)
        before = results.get(variant, ([], 0.0))
        results[variant] = (before[0] + delays, before[1] + cpu)
    rounds = cfg.pick(2, 1)
    for variant, (delays, cpu) in results.items():
        label = "sync --follow" if variant == "follow" else "sync in a loop"
        delays_row(live, label, delays, cpu, seconds * rounds)
    follow_delays = sorted(results["follow"][0])
    if follow_delays:
        live.notes.append(
            "targets: median ≤ 1 s "
            + live.check("median", median(follow_delays) <= 1.0)
            + ", worst ≤ 3 s "
            + live.check("worst", follow_delays[-1] <= 3.0)
        )
    return [live, scale(cfg), idle(cfg)]


def scale(cfg: Config) -> Table:
    """14b: N followers into one centre."""
    from harness_store import Store
    from harness_store.sync import sync

    assert cfg.pg is not None
    counts = cfg.pick((1, 5, 20), (1, 5))
    steps = cfg.pick(2_000, 300)
    seconds = cfg.pick(20.0, 6.0)
    table = Table(
        f"14b. N followers into one centre (catch-up of {steps:,} steps each; then live at "
        "10 steps/s each)",
        ["followers", "catch-up rows/s", "sync rows/s", "median delay", "worst delay", "CPU each"],
    )
    for n in counts:
        say(f"follow: 14b {n} followers")
        paths = [prefilled(cfg, f"scale-{n}-{k}", steps) for k in range(n)]
        with pg_database(cfg.pg, f"hs_bench_follow_sync_{n}") as url:
            Store.open(url).close()
            start = time.perf_counter()
            report = sync(paths, url)
            sync_rate = report.rows / (time.perf_counter() - start)
        with pg_database(cfg.pg, f"hs_bench_follow_n{n}") as url:
            Store.open(url).close()
            dest = url.render_as_string(hide_password=False)
            observer = Observer(url)
            away = [p.with_name(p.name + ".away") for p in paths]
            for p, a in zip(paths, away, strict=True):
                os.replace(p, a)
            followers = [follower([p], dest) for p in paths]
            for f in followers:  # started, waiting for their sources
                Lines(f).wait('"waiting"')
            start = time.perf_counter()
            for p, a in zip(paths, away, strict=True):
                os.replace(a, p)
            observer.until(n * steps)
            caught = time.perf_counter() - start
            rows = report.rows  # the same stores: the same rows
            stop = cfg.work / f"stop-scale-{n}"
            with writers(paths, stop, 10) as procs:
                before = [cpu_seconds(f.pid) for f in followers]
                time.sleep(seconds)
                used = [cpu_seconds(f.pid) - b for f, b in zip(followers, before, strict=True)]
            total = written(procs)
            observer.until(n * steps + total)
            stop_all(followers)
            observer.close()
            ordered = sorted(observer.delays)
            table.add(
                str(n),
                fmt_rate(rows / caught, " rows/s"),
                fmt_rate(sync_rate, " rows/s"),
                f"{median(ordered):.2f} s" if ordered else "—",
                f"{ordered[-1]:.2f} s" if ordered else "—",
                f"{median(used) / seconds * 100:.1f} %",
            )
        for p in paths:
            p.unlink(missing_ok=True)
    table.notes.append(
        "catch-up: from the stores put in place (the followers already running) to the centre "
        "holding every row; sync rows/s: one `sync` of the same stores into a fresh database "
        "in the same run"
    )
    return table


def idle(cfg: Config) -> Table:
    """14c: a follower with nothing to send."""
    from harness_store import Store

    assert cfg.pg is not None
    seconds = cfg.pick(60.0, 10.0)
    table = Table(
        "14c. an idle follower (3 sources, nothing written)",
        ["window", "CPU of one core", "memory at start", "memory at end", "target", "result"],
    )
    say("follow: 14c idle")
    paths = [prefilled(cfg, f"idle-{k}", 100) for k in range(3)]
    with pg_database(cfg.pg, "hs_bench_follow_idle") as url:
        Store.open(url).close()
        observer = Observer(url)
        proc = follower(paths, url.render_as_string(hide_password=False))
        Lines(proc)
        observer.until(300)
        time.sleep(2)  # its last looks backed off
        cpu, rss = cpu_seconds(proc.pid), rss_mb(proc.pid)
        time.sleep(seconds)
        used, rss_end = cpu_seconds(proc.pid) - cpu, rss_mb(proc.pid)
        stop_all([proc])
        observer.close()
    share = used / seconds * 100
    table.add(
        f"{seconds:.0f} s",
        f"{share:.2f} %",
        f"{rss:.0f} MB",
        f"{rss_end:.0f} MB",
        "≤ 5 %",
        table.check("idle CPU", share <= 5.0),
    )
    return table
