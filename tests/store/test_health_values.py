"""`Store.check` on hostile values: step numbers up to 2⁶³−1 cost no more than small ones, and a
value of the wrong type or form is a finding, never a raw error.

The values are planted as another writer would leave them (raw SQL on the store's file or
database); SQLite keeps whatever it is given in a column of another type, PostgreSQL only text
in a text column.
"""

from __future__ import annotations

import pytest

from harness_store.records.health import ROWS_SHOWN, FindingKind

from .healthkit import kinds, plant, populated

K = FindingKind


@pytest.mark.parametrize("last", [30_000_000, 2**63 - 1])
def test_gaps_below_a_huge_step_number_are_counted_not_enumerated(
    store_target: str, last: int
) -> None:
    """Before: a set of every number below the last (2.2 GB for 30 million; 2⁶³−1 never
    ended). Now the gaps are ranges found in SQL: the finding lists the first ones and counts
    them all."""
    store, runs = populated(store_target)
    root = runs["root"]
    with store:
        plant(
            store,
            f"INSERT INTO steps (run_id, step, decision, result) VALUES ({root}, {last}, 'a', 'b')",
            f"INSERT INTO checkpoint_events (run_id, step, kind) VALUES ({root}, {last}, "
            "'checkpoint')",
        )
        report = store.check()
    (gap,) = report.findings
    assert gap.kind is K.STEP_GAP
    assert gap.rows == tuple(range(4, 4 + ROWS_SHOWN))
    assert gap.count == last - 4  # 4 … last − 1
    assert f"4–{last - 1}" in gap.detail
    assert len(gap.detail) < 500


def test_gaps_are_named_as_ranges(store_target: str) -> None:
    store, runs = populated(store_target)
    root = runs["root"]
    with store:
        plant(
            store,
            *(
                f"INSERT INTO steps (run_id, step, decision, result) VALUES ({root}, {n}, 'a', 'b')"
                for n in (5, 9, 12)
            ),
            *(
                f"INSERT INTO checkpoint_events (run_id, step, kind) VALUES ({root}, {n}, "
                "'checkpoint')"
                for n in (5, 9, 12)
            ),
        )
        report = store.check()
    assert kinds(report) == [("step_gap", "steps", (4, 6, 7, 8, 10, 11))]
    assert "no step 4, 6–8, 10–11 below its last step 12" in report.findings[0].detail
    assert report.findings[0].count == 6
