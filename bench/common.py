"""What every benchmark shares: configuration, interleaved timing, tables, payloads, stores.

Timing discipline (the machine is small and noisy): a benchmark is a set of *variants* — the
candidate and its baseline(s) — each a function that runs one block of work and returns seconds
per operation. `interleaved` runs every variant once per round, rotating which goes first, for
several rounds after a discarded warm-up round. A table then shows each variant's median and
the median of the per-round ratios to the baseline (the ratio of two blocks run back to back is
far steadier than the ratio of two medians taken minutes apart).
"""

from __future__ import annotations

import gc
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = REPO / "bench" / ".cache"

if str(REPO / "tests") not in sys.path:  # support.legacy builds stores as upstream releases do
    sys.path.insert(0, str(REPO / "tests"))


# --- configuration -----------------------------------------------------------------------


@dataclass
class Config:
    quick: bool
    cache: Path
    """Built stores reused across invocations (large, deterministic)."""
    work: Path
    """Scratch files of this invocation, removed at the end."""
    pg: str | None = None
    """SQLAlchemy URL of a PostgreSQL server to create scratch databases on."""

    def pick(self, full: Any, quick: Any) -> Any:
        return quick if self.quick else full


def say(message: str) -> None:
    """Progress on stderr, so stdout holds only the tables."""
    print(f"  … {message}", file=sys.stderr, flush=True)


# --- timing ------------------------------------------------------------------------------

Variant = tuple[str, Callable[[], float]]


def interleaved(
    variants: Sequence[Variant], rounds: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Run each variant once per round, rotating the order; return its per-round results."""
    out: dict[str, list[float]] = {name: [] for name, _ in variants}
    items = list(variants)
    for r in range(warmup + rounds):
        k = r % len(items)
        for name, fn in items[k:] + items[:k]:
            gc.collect()
            value = fn()
            if r >= warmup:
                out[name].append(value)
    return out


def alternating(
    ops: Sequence[tuple[str, Callable[[int], Any]]], n: int, window: int, warmup: int = 0
) -> dict[str, list[float]]:
    """Call each op once per iteration `i` (op(i)), rotating which goes first, for `warmup + n`
    iterations; return per op the mean seconds per call of each window of `window` timed
    iterations. Side-by-side calls share whatever the machine is doing at that moment."""
    times: dict[str, list[float]] = {name: [] for name, _ in ops}
    perf = time.perf_counter
    k = len(ops)
    gc.collect()
    for i in range(warmup + n):
        for j in range(k):
            name, op = ops[(i + j) % k]
            start = perf()
            op(i)
            elapsed = perf() - start
            if i >= warmup:
                times[name].append(elapsed)
    usable = n - n % window
    return {
        name: [sum(ts[w : w + window]) / window for w in range(0, usable, window)]
        for name, ts in times.items()
    }


def timed(fn: Callable[[], Any]) -> float:
    """Seconds one call of `fn` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def speedup(baseline: Sequence[float], candidate: Sequence[float]) -> float:
    """Median over rounds of baseline time / candidate time: how many times the candidate's
    throughput is the baseline's (> 1 means the candidate is faster)."""
    return statistics.median(b / c for b, c in zip(baseline, candidate, strict=True))


def spread(values: Sequence[float]) -> str:
    """The relative spread of a series (max/min − 1), to show how noisy a row was."""
    low = min(values)
    return f"±{(max(values) / low - 1) * 50:.0f}%" if low > 0 else "—"


# --- formatting --------------------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:,.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:,.2f} ms"
    return f"{seconds:,.2f} s"


def fmt_rate(per_second: float, unit: str = "/s") -> str:
    return f"{per_second:,.0f}{unit}"


def fmt_ratio(value: float) -> str:
    return f"{value:,.2f}×" if value < 100 else f"{value:,.0f}×"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError


@dataclass
class Table:
    """One benchmark's result: a markdown table, notes, and the targets it checked."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verdicts: list[tuple[str, bool]] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([str(c) for c in cells])

    def check(self, what: str, ok: bool) -> str:
        """Record a target and whether it was met; return PASS or MISS for a cell."""
        self.verdicts.append((what, ok))
        return "PASS" if ok else "MISS"

    def render(self) -> str:
        widths = [len(c) for c in self.columns]
        for row in self.rows:
            widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

        out = [f"### {self.title}", "", line(self.columns)]
        out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        out += [line(row) for row in self.rows]
        if self.notes:
            out.append("")
            out += [f"- {note}" for note in self.notes]
        return "\n".join(out) + "\n"


# --- payloads ----------------------------------------------------------------------------

_PROMPT = (
    "You are editing the Rust crate in /work/repo. The test tests::parser::parses_empty_input "
    "fails with `called Option::unwrap() on a None value` at src/parser.rs:142. Read the test, "
    "find where the parser assumes a non-empty token stream and make the smallest change that "
    "handles empty input without changing the public API. Continue from step {n:>6}."
)
_TOOL_CALL = (
    '{{"name":"edit_file","arguments":{{"path":"src/parser.rs","line":142,'
    '"replace":"tokens.first()?","step":{n:>6}}}}}'
)
_RESULT = "ok: src/parser.rs edited, 1 line changed (step {n})"


def prompt(n: int) -> str:
    """A step's prompt: ~300 bytes of plain text, distinct per step."""
    return _PROMPT.format(n=n)


def tool_call(n: int) -> str:
    """A step's tool call: ~100 bytes of JSON, distinct per step."""
    return _TOOL_CALL.format(n=n)


def step_record(n: int) -> Any:
    """The `StepRecord` of step `n` of a realistic run."""
    from harness_store import StepRecord

    return StepRecord(n, "tool", _RESULT.format(n=n), prompt(n), tool_call(n), 700 + n % 900)


def checkpoint_ops(
    store: Any, runs: Sequence[int], record_of: Callable[[int], Any]
) -> list[Callable[[int], None]]:
    """One `checkpoint_step` op per run for worker threads: op(n) checkpoints `record_of(n)`."""

    def make(run: int) -> Callable[[int], None]:
        checkpoint = store.checkpoint_step

        def op(n: int) -> None:
            checkpoint(run, record_of(n))

        return op

    return [make(run) for run in runs]


def step_records(first: int, count: int) -> list[Any]:
    return [step_record(n) for n in range(first, first + count)]


# --- stores ------------------------------------------------------------------------------

INSERT_STEP = (
    "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
INSERT_CHECKPOINT = (
    "INSERT INTO checkpoint_events (run_id, step, kind, detail) VALUES (?, ?, 'checkpoint', NULL)"
)
"""Upstream 0.13's two checkpoint statements (the same as the Store's compiled ones)."""


def empty_head(cfg: Config) -> Path:
    """An empty store built by the Alembic chain (0.1 → … → 0.13 → hs1), closed."""
    path = cfg.work / "head-empty.sqlite3"
    if not path.exists():
        from harness_store import Store

        Store.open(path, backup=False).close()
    return path


def head_template(cfg: Config) -> Path:
    """A store built by the Alembic chain with one run (id 1) to checkpoint into."""
    path = cfg.work / "head-template.sqlite3"
    if not path.exists():
        from harness_store import Store

        with Store.open(copy_store(empty_head(cfg), path), backup=False) as store:
            store.start_run("benchmark run", "src/parser.rs")
    return path


def copy_store(source: Path, destination: Path) -> Path:
    """Copy a closed SQLite store (its WAL was checkpointed and removed at close)."""
    for suffix in ("", "-wal", "-shm"):
        target = Path(str(destination) + suffix)
        if target.exists():
            target.unlink()
    if Path(str(source) + "-wal").exists():
        raise RuntimeError(f"{source} has a -wal file: close every connection first")
    shutil.copyfile(source, destination)
    settle(destination)
    return destination


def settle(path: Path) -> None:
    """Flush a freshly written file to disk, as a store that has sat on disk is. Without it
    the first fsync a benchmark times (a WAL switch, a commit) also writes out the whole copy,
    a cost proportional to the file that no real store pays."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_store(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def raw_connect(path: Path, synchronous: str, like: Any = None) -> sqlite3.Connection:
    """A plain `sqlite3` connection set up as the Store sets up its own: no implicit
    transactions, 5 s busy timeout, the given `synchronous` — and, given a Store as `like`,
    that Store's WAL auto-checkpoint interval (whatever the package sets, the baseline gets)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
    if like is not None:
        with like.engine.connect() as store_conn:
            frames = int(store_conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one())
        conn.execute(f"PRAGMA wal_autocheckpoint = {frames}")
    return conn


SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def store_pragmas(store: Any) -> tuple[str, str]:
    """(synchronous, journal_mode) as a Store's own connections have them."""
    with store.engine.connect() as conn:
        sync = int(conn.exec_driver_sql("PRAGMA synchronous").scalar_one())
        mode = str(conn.exec_driver_sql("PRAGMA journal_mode").scalar_one())
    return f"{sync} ({SYNC_NAMES.get(sync, '?')})", mode


def environment(cfg: Config) -> list[str]:
    """Lines describing the machine and the versions, and the Store's default durability."""
    import sqlalchemy

    from harness_store import Store

    probe = copy_store(head_template(cfg), cfg.work / "probe.sqlite3")
    with Store.open(probe) as store:
        default_sync, mode = store_pragmas(store)
    remove_store(probe)
    options = sqlite3.connect(":memory:").execute("PRAGMA compile_options").fetchall()
    wal_default = [o[0] for o in options if "SYNCHRONOUS" in o[0]]
    import harness_store

    source = Path(harness_store.__file__).resolve().parent.parent
    try:
        import subprocess

        head = (
            subprocess.run(
                ["git", "-C", str(source), "log", "-1", "--format=%h %s"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
            or "not a git checkout"
        )
        dirty = subprocess.run(
            ["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except OSError:
        head, dirty = "git unavailable", ""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return [
        f"harness_store from {source} at {head}{' (with uncommitted changes)' if dirty else ''}",
        f"load average at start: {load} (other processes share the {os.cpu_count()} CPUs)",
        f"python {platform.python_version()}, SQLite {sqlite3.sqlite_version} "
        f"({', '.join(wal_default) or 'no synchronous compile options'}), "
        f"SQLAlchemy {sqlalchemy.__version__}, {os.cpu_count()} CPUs, {platform.platform()}",
        f"Store.open(path) without synchronous=: PRAGMA synchronous = {default_sync}, "
        f"journal_mode = {mode}",
        f"mode: {'quick' if cfg.quick else 'full'}; cache: {cfg.cache}; scratch: {cfg.work}",
    ]


# --- PostgreSQL --------------------------------------------------------------------------


def pg_conninfo(url: Any) -> str:
    """A libpq URI for psycopg from a SQLAlchemy URL (or URL string)."""
    from sqlalchemy.engine import make_url

    u = make_url(url) if isinstance(url, str) else url
    return u.set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def pg_database(server: str, name: str, template: str | None = None) -> Iterator[Any]:
    """A scratch database on the server at `server`, dropped afterwards; yields its URL."""
    import psycopg
    from sqlalchemy.engine import make_url

    from harness_store.engine import to_url

    base = to_url(server)
    admin = psycopg.connect(pg_conninfo(base), autocommit=True)
    try:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        extra = f' TEMPLATE "{template}"' if template else ""
        admin.execute(f'CREATE DATABASE "{name}"{extra}')
        try:
            yield make_url(base).set(database=name)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()
