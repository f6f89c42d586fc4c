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
  Each source starts new, and again holding `BIG_RUNS` runs of ten steps (a pass reads every
  state row of its source, so its cost grows with them). With `HS_BENCH_BASELINE=DIR` (a
  checkout of other code, e.g. `git worktree add DIR main`) a follower running that code is
  a third variant, and the ratios of this code's delays and CPU to its are shown.
  Then, aged: each source a copy of benchmark 17's store of a year (`AGED_RUNS` finished runs
  in trees, built with raw inserts and cached), followed by `sync --follow` alone (and the
  baseline's): a pass must cost what changed, not the source's size.
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

import json
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
from .stores import drop_role, pg_conninfo, pg_database

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

BASELINE = os.environ.get("HS_BENCH_BASELINE")
"""A checkout whose code the `follow-baseline` variant runs (its `harness_store` first on the
path), or None."""

BIG_RUNS = 2_000
"""Runs (of ten steps) each source of 14a's second half holds before it is written."""

AGED_RUNS = 100_000
"""Runs each source of 14a's aged half holds before it is written: benchmark 17's store of a
year (`scale.build`: trees of finished runs, raw inserts, cached), copied per source."""

ROUNDS = "HS_BENCH_FOLLOW_ROUNDS"
"""The environment variable that sets the rounds of the aged tables (default 2, quick 1)."""

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


def python(*args: str, code: str | None = None) -> subprocess.Popen[str]:
    """A Python process; with `code`, the `harness_store` of that checkout first."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([code, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.Popen(
        [sys.executable, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def follower(sources: list[Path], url: str, code: str | None = None) -> subprocess.Popen[str]:
    command = ["-m", "harness_store.cli", "sync", "--follow", *map(str, sources), url, "--json"]
    return python(*command, code=code)


class Lines:
    """A process's stdout read by a thread (so its pipe never fills); an event per word."""

    def __init__(self, proc: subprocess.Popen[str], sources: int = 1) -> None:
        self.proc = proc
        self.sources = sources
        self.seen: dict[str, threading.Event] = {}
        self.passed: set[str] = set()
        """The sources a pass was made of (from `--json` lines)."""
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
            if line.startswith('{"event": "pass"'):
                self.passed.add(json.loads(line)["source"])  # this thread's alone
                if len(self.passed) >= self.sources:
                    self.event("every source").set()

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

    def __init__(self, url: Any, above: int = 0) -> None:
        self.above = above
        """Steps up to this id are not looked at (those a first pass sent)."""
        self.path = url if isinstance(url, Path) else None
        """A SQLite centre's file (polled with the raw driver), or None for PostgreSQL."""
        self.conninfo = "" if self.path is not None else pg_conninfo(url)
        self.delays: list[float] = []
        self.steps = 0
        self.live = 0
        """Steps written in the live phase seen so far (their decision is a time)."""
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        """New steps by id, each once. Concurrent passes commit their ids out of order, so
        each poll looks again above the highest id seen `LOOK_BACK` seconds ago (a pass
        commits sooner), leaving out the ids seen since."""
        if self.path is not None:
            self._poll_sqlite(self.path)
            return
        import psycopg

        seen: set[int] = set()
        floors: list[tuple[float, int]] = []
        # never prepared: a custom plan takes the ids seen as a constant array, which the
        # server hashes (a generic plan compares each row with every id: minutes a poll)
        with psycopg.connect(self.conninfo, autocommit=True, prepare_threshold=None) as conn:
            while not self.halt.wait(0.02):
                now = time.monotonic()
                floor = max((i for t, i in floors if t <= now - LOOK_BACK), default=self.above)
                floors = [(t, i) for t, i in floors if t > now - 2 * LOOK_BACK] + [
                    (now, self.above)
                ]
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
                        self.live += 1
                        self.delays.append(wall - float(decision))
                floors[-1] = (now, max(seen, default=self.above))
                seen = {i for i in seen if i > floor}

    def _poll_sqlite(self, path: Path) -> None:
        """The same polls of a SQLite centre (one writer: ids commit in order)."""
        import sqlite3

        top = self.above
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        try:
            while not self.halt.wait(0.02):
                try:
                    rows = conn.execute(
                        "SELECT id, decision FROM steps WHERE id > ? ORDER BY id", (top,)
                    ).fetchall()
                except sqlite3.OperationalError:  # locked for a moment, or not made yet
                    continue
                wall = time.time()
                for row_id, decision in rows:
                    top = max(top, row_id)
                    self.steps += 1
                    if decision[:1].isdigit():
                        self.live += 1
                        self.delays.append(wall - float(decision))
        finally:
            conn.close()

    def until(self, steps: int, timeout: float = 600, live: bool = False) -> float:
        """Wait until the centre holds `steps` steps (`live`: steps of the live phase); the
        seconds waited."""
        start = time.monotonic()
        while (self.live if live else self.steps) < steps and time.monotonic() - start < timeout:
            time.sleep(0.02)
        return time.monotonic() - start

    def close(self) -> None:
        self.halt.set()
        self.thread.join(10)


def top_step(url: Any) -> int:
    """The highest step id the centre at `url` (a SQLite file or a PostgreSQL URL) holds."""
    if isinstance(url, Path):
        import sqlite3

        conn = sqlite3.connect(f"file:{url}?mode=ro", uri=True)
        try:
            return int(conn.execute("SELECT coalesce(max(id), 0) FROM steps").fetchone()[0])
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(pg_conninfo(url), autocommit=True) as conn:
        row = conn.execute("SELECT coalesce(max(id), 0) FROM steps").fetchone()
    return int(row[0]) if row else 0


def prefilled(cfg: Config, name: str, steps: int, per_run: int = 100) -> Path:
    """A store holding `steps` steps in runs of `per_run` (built once into the cache)."""
    import shutil

    from harness_store import Store

    path = cfg.work / f"{name}.sqlite3"
    remove(path)
    built = cfg.cache / f"follow-{steps}-{per_run}.sqlite3"
    if not built.exists():
        building = built.with_name(built.name + ".building")
        building.parent.mkdir(parents=True, exist_ok=True)
        building.unlink(missing_ok=True)
        with Store.open(building, synchronous="off", backup=False) as store:
            for first in range(1, steps + 1, per_run):
                run = store.start_run("bench", "src/parser.rs")
                store.checkpoint_steps(run, step_records(1, min(per_run, steps - first + 1)))
                store.finish_run(run, "success")
        os.replace(building, built)
    shutil.copyfile(built, path)
    return path


def aged_copy(cfg: Config, name: str, runs: int) -> Path:
    """A copy of benchmark 17's store of `runs` runs (built once into the cache)."""
    from .scale import build
    from .stores import copy_store

    path = cfg.work / f"{name}.sqlite3"
    remove(path)
    return copy_store(build(cfg, runs), path)


def remove(path: Path) -> None:
    """A store and its side files: a `-wal` left beside a new file at the path would be
    replayed onto it (a follower's read keeps them when it was open as the writer closed)."""
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


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


@contextmanager
def centre(cfg: Config, name: str, sqlite: bool) -> Iterator[Any]:
    """A fresh centre made by the chain: a PostgreSQL database (its URL) or a SQLite file."""
    from harness_store import Store

    if sqlite:
        path = cfg.work / f"{name}.sqlite3"
        remove(path)
        Store.open(path, backup=False).close()
        try:
            yield path
        finally:
            remove(path)
        return
    assert cfg.pg is not None
    with pg_database(cfg.pg, name) as url:
        Store.open(url).close()
        yield url


def live_delay(
    cfg: Config, variant: str, seconds: float, runs: int = 0, aged: int = 0, sqlite: bool = False
) -> tuple[list[float], float]:
    """14a's one variant: 3 sources at 50 steps/s, each holding `runs` runs of ten steps first
    (or a copy of benchmark 17's store of `aged` runs); the delays and the syncing process's
    CPU. `sqlite`: into a SQLite centre rather than PostgreSQL."""
    name = f"hs_bench_follow_{variant.replace('-', '_')}_{os.getpid()}"
    with centre(cfg, name, sqlite) as url:
        dest = str(url) if sqlite else url.render_as_string(hide_password=False)
        paths = [
            aged_copy(cfg, f"live-{variant}-{n}", aged)
            if aged
            else prefilled(cfg, f"live-{variant}-{n}", max(1, runs * 10), 10 if runs else 100)
            for n in range(3)
        ]
        stop = cfg.work / f"stop-{variant}"
        role = None
        if variant == "follow-role":  # the follower logs in as a follower role (bench 18)
            from harness_store.sync.roles import grant

            role = f"hs_bench_follow_role_{os.getpid()}"
            grant(dest, role, "follower")
        if variant.startswith("follow"):
            code = BASELINE if variant == "follow-baseline" else None
            login = url.set(username=role).render_as_string(hide_password=False) if role else dest
            syncing = follower(paths, login, code)
            Lines(syncing, len(paths)).wait("every source", 1800)  # each one's first pass
        else:
            syncing = python("-c", LOOP, dest, *map(str, paths))
            Lines(syncing).wait("synced", 1800)
        observer = Observer(url, top_step(url))  # the live steps alone
        with writers(paths, stop, 50) as procs:  # once the process is up and has synced
            start_cpu = cpu_seconds(syncing.pid)
            time.sleep(seconds)
            used = cpu_seconds(syncing.pid) - start_cpu
        total = written(procs)
        observer.until(total, live=True)  # every live step seen, the last ones' delays too
        stop_all([syncing])
        observer.close()
        for p in paths:
            remove(p)
    if role is not None:
        drop_role(cfg.pg, role)
    return observer.delays, used


LABELS = {
    "follow": "sync --follow",
    "follow-baseline": "sync --follow, baseline code",
    "follow-role": "sync --follow as a follower role",
    "sync-loop": "sync in a loop",
}


def run(cfg: Config) -> list[Table]:
    if not cfg.pg:
        say("follow: skipped (needs --pg)")
        return []
    return [
        live(cfg, 0),
        live(cfg, cfg.pick(BIG_RUNS, 500)),
        live(cfg, 0, aged=cfg.pick(AGED_RUNS, 20_000)),
        scale(cfg),
        idle(cfg),
    ]


def run_aged(cfg: Config) -> list[Table]:
    """14a on sources of a year's store of `AGED_RUNS` runs each, beside new sources (two
    rounds; `follow-twenty` gives 14b with 20 followers)."""
    if not cfg.pg:
        say("follow-aged: skipped (needs --pg)")
        return []
    return [aged_beside_new(cfg, cfg.pick(AGED_RUNS, 20_000))]


def run_twenty(cfg: Config) -> list[Table]:
    """14b with 20 followers into one centre, two rounds (quick: 5, one), with the issue's
    target."""
    if not cfg.pg:
        say("follow-twenty: skipped (needs --pg)")
        return []
    twenty = scale(cfg, cfg.pick((20, 20), (5,)))  # two rounds
    for row in twenty.rows:
        worst = float(row[4].split()[0]) if row[4] != "—" else float("inf")
        twenty.notes.append(
            f"target: {row[0]} followers' worst delay ≤ 3 s "
            + twenty.check(f"{row[0]} followers: worst delay ≤ 3 s", worst <= 3.0)
        )
    return [twenty]


def run_aged_sqlite(cfg: Config) -> list[Table]:
    """14a on a year's sources of `AGED_RUNS` runs each into a SQLite centre."""
    return [aged_beside_new(cfg, cfg.pick(AGED_RUNS, 20_000), sqlite=True)]


def aged_beside_new(cfg: Config, aged: int, sqlite: bool = False) -> Table:
    """14a on a year's sources of `aged` runs each, rounds alternated with the same follower on
    new sources (the machine's own share of the delay, measured side by side)."""
    seconds = cfg.pick(30.0, 8.0)
    rounds = int(os.environ.get(ROUNDS, "0")) or cfg.pick(2, 1)
    into = "a SQLite centre" if sqlite else "PostgreSQL"
    table = Table(
        f"14a. delay from a source's commit to the centre's, 3 sources × 50 steps/s, "
        f"`sync --follow` into {into}, sources of a year's {aged:,} runs beside new ones",
        ["sources", "round", "median", "p95", "worst", "CPU of one core", "load (1 min)"],
    )
    got: dict[str, list[float]] = {"aged": [], "new": []}
    for r in range(rounds):
        for kind in ("aged", "new") if r % 2 == 0 else ("new", "aged"):
            say(f"follow: 14a into {into}, {kind} sources, round {r + 1}")
            delays, cpu = live_delay(
                cfg, "follow", seconds, 0, aged if kind == "aged" else 0, sqlite=sqlite
            )
            got[kind] += delays
            ordered = sorted(delays) or [float("nan")]
            say(
                f"  {kind}: median {median(ordered):.2f} s, worst {ordered[-1]:.2f} s, "
                f"{len(ordered):,} steps, load {os.getloadavg()[0]:.1f}"
            )
            table.add(
                f"a year's {aged:,} runs each" if kind == "aged" else "new",
                r + 1, f"{median(ordered):.2f} s", f"{ordered[int(len(ordered) * 0.95)]:.2f} s",
                f"{ordered[-1]:.2f} s", f"{cpu / seconds * 100:.0f} %",
                f"{os.getloadavg()[0]:.1f}",
            )  # fmt: skip
    mine, new = sorted(got["aged"]), sorted(got["new"])
    if mine and new:
        table.notes.append(
            f"all rounds, a year's sources ÷ new ones: median {median(mine) / median(new):.2f}×, "
            f"worst {mine[-1] / new[-1]:.2f}×"
        )
        table.notes.append(
            "targets (a year's sources): median ≤ 1 s "
            + table.check(
                f"median delay into {into}, sources of {aged:,} runs", median(mine) <= 1.0
            )
            + ", worst ≤ 3 s "
            + table.check(f"worst delay into {into}, sources of {aged:,} runs", mine[-1] <= 3.0)
        )
    return table


def live(cfg: Config, runs: int, aged: int = 0) -> Table:
    """14a: the variants side by side, rounds interleaved, sources holding `runs` runs (or,
    `aged`, a year's store of that many runs: only the follower, and the baseline's)."""
    seconds = cfg.pick(30.0, 8.0)
    held = f", each source holding {runs:,} runs first" if runs else ", new sources"
    if aged:
        held = f", each source a year's store of {aged:,} runs"
    table = Table(
        f"14a. delay from a source's commit to the centre's, 3 sources × 50 steps/s{held}",
        ["variant", "median", "p95", "worst", "CPU of one core"],
    )
    variants = ["follow"] if aged else ["follow", "follow-role", "sync-loop"]
    variants += ["follow-baseline"] if BASELINE else []
    rounds = cfg.pick(2, 1)
    results: dict[str, tuple[list[float], float]] = {}
    for r in range(rounds):
        for variant in variants[r % len(variants) :] + variants[: r % len(variants)]:
            say(f"follow: 14a {variant}{held}")
            delays, cpu = live_delay(cfg, variant, seconds, runs, aged)
            before = results.get(variant, ([], 0.0))
            results[variant] = (before[0] + delays, before[1] + cpu)
    for variant in variants:
        delays, cpu = results[variant]
        delays_row(table, LABELS[variant], delays, cpu, seconds * rounds)
    mine = sorted(results["follow"][0])
    if BASELINE and mine and results["follow-baseline"][0]:
        theirs = sorted(results["follow-baseline"][0])
        table.notes.append(
            "this code ÷ baseline: median "
            f"{median(mine) / median(theirs):.2f}×, p95 "
            f"{mine[int(len(mine) * 0.95)] / theirs[int(len(theirs) * 0.95)]:.2f}×, worst "
            f"{mine[-1] / theirs[-1]:.2f}×, CPU "
            f"{results['follow'][1] / max(results['follow-baseline'][1], 1e-9):.2f}× "
            f"(baseline: {BASELINE})"
        )
    as_role = sorted(results.get("follow-role", ([], 0.0))[0])
    if mine and as_role:
        table.notes.append(
            f"a follower role ÷ the owner: median {median(as_role) / median(mine):.2f}×, worst "
            f"{as_role[-1] / mine[-1]:.2f}×, CPU "
            f"{results['follow-role'][1] / max(results['follow'][1], 1e-9):.2f}×"
        )
    if mine:
        table.notes.append(
            "targets: median ≤ 1 s "
            + table.check("median" + held, median(mine) <= 1.0)
            + ", worst ≤ 3 s "
            + table.check("worst" + held, mine[-1] <= 3.0)
        )
    return table


def scale(cfg: Config, counts: tuple[int, ...] | None = None) -> Table:
    """14b: N followers into one centre."""
    from harness_store import Store
    from harness_store.sync import sync

    assert cfg.pg is not None
    counts = counts or cfg.pick((1, 5, 20), (1, 5))
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
            observer.until(total, live=True)
            stop_all(followers)
            observer.close()
            ordered = sorted(observer.delays)
            say(f"  {n} followers: worst {max(ordered, default=0):.2f} s, {len(ordered):,} steps")
            table.add(
                str(n),
                fmt_rate(rows / caught, " rows/s"),
                fmt_rate(sync_rate, " rows/s"),
                f"{median(ordered):.2f} s" if ordered else "—",
                f"{ordered[-1]:.2f} s" if ordered else "—",
                f"{median(used) / seconds * 100:.1f} %",
            )
        for p in paths:
            remove(p)
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
