"""`check` and `repair` of a store at hs6 or hs7 whose token-total table was dropped by hand:
the table is named missing (every step or call written meanwhile fails on the triggers that
still name it), and `repair` makes it again and counts every run's total into it, after which
the door and the check are exact again."""

from __future__ import annotations

import pytest

from harness_store import StepRecord
from harness_store.records import ProviderCall, Usage

from .checkkit import kinds, plant, populated

TABLES = ("hs_run_tokens", "hs_run_call_tokens")


@pytest.mark.parametrize("table", TABLES)
def test_a_dropped_token_table_is_named_and_made_again(store_target: str, table: str) -> None:
    store, runs = populated(store_target)
    with store:
        plant(store, f"DROP TABLE {table}")
        report = store.check()
        assert ("missing_table", table, (table,)) in kinds(report), report
        missing = next(f for f in report.findings if f.table == table)
        assert missing.repairable and table in missing.detail
        repaired = store.repair()
        assert repaired.after.healthy, repaired.after
        assert any(f"created table {table}" in line for line in repaired.done), repaired.done
        store.checkpoint_step(
            runs["root"], StepRecord.new(4, "act", "ok").with_trace("p", "", 7)
        )  # the triggers write their table again
        store.record_provider_call(
            runs["root"], ProviderCall(2, 0, "prov", "m1", Usage(0, 0, 9), 5, None, None, None)
        )
        assert store.check().healthy
