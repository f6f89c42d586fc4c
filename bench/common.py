"""What every benchmark shares: configuration, interleaved timing, tables, payloads.

The stores and the baselines they are measured against are in `bench.stores`.

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
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Sequence
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


def add_variant(
    table: Table,
    lead: Sequence[str],
    variant: str,
    series: Sequence[float],
    versus: str,
    target: str = "",
    result: str = "",
    items: int = 1,
) -> None:
    """A row for one variant of an alternated measurement: `lead` cells (e.g. the
    synchronous level), the variant, its median time, rate (`items` per block), noise, its
    ratio to the baseline as `versus` says it, and a target with its result."""
    middle = median(series)
    table.add(
        *lead, variant, fmt_time(middle), fmt_rate(items / middle), spread(series), versus,
        target, result,
    )  # fmt: skip


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


# --- the run's environment ----------------------------------------------------------


def environment(cfg: Config) -> list[str]:
    """Lines describing the machine and the versions, and the Store's default durability."""
    import sqlalchemy

    from harness_store import Store

    from .stores import copy_store, head_template, remove_store, store_pragmas

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
