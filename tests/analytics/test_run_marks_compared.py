"""The runs' marks compared with the last export's a batch at a time (`TouchedRuns`): batches of
either side that do not line up, runs changed, gone and new, and the store's batches passed on
whole and in order to be written as the export's marks."""

from __future__ import annotations

import pyarrow as pa

from harness_store.analytics.changes import TouchedRuns
from harness_store.analytics.files import MARK_SCHEMA


def batches(pairs: list[tuple[int, int]], size: int) -> list[pa.RecordBatch]:
    table = pa.Table.from_pylist([{"run_id": r, "mark": m} for r, m in pairs], MARK_SCHEMA)
    return table.to_batches(max_chunksize=size)


def compared(known: list[tuple[int, int]], now: list[tuple[int, int]]) -> TouchedRuns:
    touched = TouchedRuns(batches(known, 3), batches(now, 2))
    passed = pa.Table.from_batches(list(touched), MARK_SCHEMA)
    assert passed.to_pylist() == [{"run_id": r, "mark": m} for r, m in now]
    return touched


def test_runs_changed_and_gone_are_found_across_batches() -> None:
    known = [(r, r * 10) for r in range(1, 12)]
    now = [(r, r * 10 + (r == 5)) for r in range(1, 12) if r not in (2, 9)]
    now += [(12, 120), (13, 130)]  # new since: not touched, but not the same marks
    touched = compared(known, now)
    assert (touched.runs, touched.same) == ({2, 5, 9}, False)


def test_the_same_marks_are_the_same() -> None:
    marks = [(r, r + 7) for r in range(1, 10)]
    touched = compared(marks, marks)
    assert (touched.runs, touched.same) == (set(), True)
    touched = compared([], [])
    assert (touched.runs, touched.same) == (set(), True)


def test_only_new_runs_touch_nothing_but_change_the_marks() -> None:
    touched = compared([(1, 1), (4, 4)], [(1, 1), (2, 2), (4, 4), (5, 5)])
    assert (touched.runs, touched.same) == (set(), False)


def test_every_run_gone() -> None:
    touched = compared([(1, 1), (2, 2), (3, 3), (4, 4)], [])
    assert (touched.runs, touched.same) == ({1, 2, 3, 4}, False)


def test_without_the_last_marks_every_run_may_have_changed() -> None:
    now = [(1, 1), (2, 2), (3, 3)]
    touched = TouchedRuns(None, batches(now, 2))
    assert pa.Table.from_batches(list(touched), MARK_SCHEMA).num_rows == 3
    assert touched.runs is None and not touched.same
