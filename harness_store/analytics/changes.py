"""Rows an incremental export already wrote that changed in the store since: runs archived in
place (the same rows, their words emptied) and runs pruned (deleted).

An append-only table's new rows are found by its high-water mark, but rows below the mark can
still change — only ever a whole run at a time (an archive empties the text of every row of a
session's runs; a prune or a session's deletion removes every row of a run). Each export
records a short digest of every run's own row and its session turns' rows (`run_marks`): an
archive empties a run's goal and its turns' words, a prune removes the run, so a run whose
mark differs from the last export's is one whose rows may have changed. Only those runs are
looked at again: their rows in the dataset are compared with the store's, and where they
differ the files holding them are written again without them, beside the store's rows of
those runs now. A run pruned since leaves the dataset with its rows, which the export reports
(`TableExport.removed`): the dataset mirrors the store, as its state tables always have.

Nothing new, nothing changed: the marks are read (the `runs` and `session_turns` tables) and
compared, and no append-only table's rows below its mark are read (the tables whose rows
change in place are still read whole, their digests compared: `dataset`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..arrow.compute import filled
from ..arrow.schema import TableShape
from ..store.arrow import read_table
from .files import Generation

if TYPE_CHECKING:
    from ..store import Store

CHUNK = 500
"""Runs compared at a time (one `IN (…)` list of the store's read)."""


class TouchedRuns:
    """The store's run marks (`run_marks`' batches) compared with the last export's (`known`,
    both in run id order; None for a dataset whose marks are not at hand): iterating it passes
    the store's batches on as they come (to be written as this export's marks), and once it
    is exhausted `runs` holds the runs whose mark changed or that are gone since (None: any
    may have changed) and `same` whether the marks are the last export's exactly. The two are
    walked side by side, a batch of each at a time, so memory holds a batch or two whatever
    the store's size."""

    def __init__(
        self, known: Iterable[pa.RecordBatch] | None, marks: Iterable[pa.RecordBatch]
    ) -> None:
        self.known = known
        self.marks = marks
        self.runs: set[int] | None = None
        self.same = False

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        if self.known is None:
            yield from self.marks
            return
        touched: set[int] = set()
        same = True
        passed: list[pa.RecordBatch] = []  # the store's batches read, not yet passed on

        def store_rows() -> Iterator[tuple[int, int]]:
            for batch in self.marks:
                passed.append(batch)
                yield from _pairs(batch)

        now = store_rows()
        current = next(now, None)
        for batch in self.known:
            yield from _drained(passed)
            for run, mark in _pairs(batch):
                while current is not None and current[0] < run:  # a run new since
                    same = False
                    current = next(now, None)
                if current is not None and current[0] == run:
                    if current[1] != mark:
                        touched.add(run)
                    current = next(now, None)
                else:
                    touched.add(run)  # gone
        if current is not None:  # runs new since, above the last known
            same = False
            for _ in now:
                yield from _drained(passed)
        yield from _drained(passed)
        self.runs, self.same = touched, same and not touched


def _pairs(batch: pa.RecordBatch) -> Iterator[tuple[int, int]]:
    """A marks batch's (run id, mark) pairs (neither is ever null)."""
    runs: list[int] = batch.column(0).to_pylist()  # type: ignore[assignment]
    marks: list[int] = batch.column(1).to_pylist()  # type: ignore[assignment]
    return zip(runs, marks, strict=True)


def _drained(batches: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    while batches:
        yield batches.pop(0)


@dataclass
class Replaced:
    """An append-only table's files after the rows of changed runs were written again."""

    files: list[dict[str, Any]]
    """The table's files up to the high-water mark: the last export's untouched, and those
    written again."""
    rows: int
    """Rows those files hold."""
    written: int = 0
    """Rows of changed runs read from the store and written."""
    removed: int = 0
    """Rows that left the dataset (those of runs pruned since, or fewer rows of a run)."""
    new_files: list[dict[str, Any]] = field(default_factory=list)
    """The files this export wrote here (dropped again if the table is rewritten whole)."""


def replace_changed_runs(
    store: Store,
    writer: Generation,
    shape: TableShape,
    previous: dict[str, Any],
    touched: set[int],
    filters: tuple[str | None, list[int] | None],
    hwm: int,
    tick: Callable[[int], None],
) -> Replaced:
    """Write again the rows (up to `hwm`) of the `touched` runs whose rows in the dataset are
    not the store's any more, and the files that held them without them."""
    since, runs = filters
    files: list[dict[str, Any]] = list(previous["files"])
    unchanged = Replaced(files, int(previous["rows"]))
    candidates = sorted(touched if runs is None else touched & set(runs))
    run_column = shape.run_column
    if not candidates or run_column is None or not files:
        return unchanged
    key = shape.key[0]
    paths = [str(writer.root / f["path"]) for f in files]
    import pyarrow.dataset as ds  # here: it loads pandas, ~40 MiB an export seldom needs

    dataset = ds.dataset(paths, format="parquet")
    changed: set[int] = set()
    before = count = 0
    new_files: list[dict[str, Any]] = []
    for part in chunks(candidates):
        written = dataset.to_table(filter=pc.field(run_column).isin(part))
        now = read_table(store, shape.name, runs=part, since=since, through=hwm)
        differ = differing_runs(written, now, run_column, key)
        if not differ:
            continue
        changed |= differ
        values = pa.array(sorted(differ), type=pa.int64())
        before += written.filter(filled(pc.is_in(written[run_column], values), False)).num_rows
        fresh = now.filter(filled(pc.is_in(now[run_column], values), False))
        files_now, rows_now = writer.write(shape.name, fresh.to_batches(), tick, skip_empty=True)
        new_files += files_now
        count += rows_now
    if not changed:
        return unchanged
    values = pa.array(sorted(changed), type=pa.int64())
    kept: list[dict[str, Any]] = []
    rewritten: list[dict[str, Any]] = []
    for entry, path in zip(files, paths, strict=True):
        holds = filled(pc.is_in(pq.read_table(path, columns=[run_column])[run_column], values),
                       False)  # fmt: skip
        if not pc.any(holds).as_py():
            kept.append(entry)
            continue
        rest = pq.read_table(path).filter(pc.invert(holds))
        if rest.num_rows:
            rewritten.extend(writer.write_rows(shape.name, rest))
    return Replaced(
        [*kept, *rewritten, *new_files],
        unchanged.rows - before + count,
        written=count,
        removed=max(before - count, 0),
        new_files=[*rewritten, *new_files],
    )


def chunks(runs: Sequence[int]) -> Iterator[list[int]]:
    """`runs` in lists short enough for one `IN (…)` of every backend."""
    for start in range(0, len(runs), CHUNK):
        yield list(runs[start : start + CHUNK])


def differing_runs(written: pa.Table, stored: pa.Table, run_column: str, key: str) -> set[int]:
    """The runs whose rows in `written` (the dataset) and `stored` (the store) differ."""
    old, new = by_run(written, run_column, key), by_run(stored, run_column, key)
    return {
        run
        for run in old.keys() | new.keys()
        if run not in old or run not in new or not old[run].equals(new[run])
    }


def by_run(data: pa.Table, run_column: str, key: str) -> dict[int, pa.Table]:
    """`data`'s rows split by run, each run's in key order."""
    data = data.sort_by([(run_column, "ascending"), (key, "ascending")])
    values: Sequence[int | None] = data[run_column].to_pylist()
    slices: dict[int, pa.Table] = {}
    start = 0
    for end in range(1, len(values) + 1):
        if end == len(values) or values[end] != values[start]:
            run = values[start]
            if run is not None:
                slices[run] = data.slice(start, end - start).combine_chunks()
            start = end
    return slices
