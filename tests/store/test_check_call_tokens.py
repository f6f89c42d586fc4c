"""`check` and `repair` of hs7's run call token totals (`hs_run_call_tokens`, which the
provider-call door reads), as of hs6's: a dropped trigger, and a kept total that disagrees with
the run's calls, are named with the run and both numbers; `repair` puts the triggers back and
recounts the totals, after which the door is exact again."""

from __future__ import annotations

import pytest

from harness_store import Store
from harness_store.errors import IntegerOverflowError
from harness_store.records import ProviderCall, Usage
from harness_store.records.health import FindingKind

from .checkkit import kinds, plant, populated

K = FindingKind
I64_MAX = 2**63 - 1


def call(total: int) -> ProviderCall:
    return ProviderCall(2, 0, "prov", "m1", Usage(0, 0, total), 5, None, None, None)


def drop_trigger(store: Store, name: str, table: str) -> str:
    return f"DROP TRIGGER {name}" + (" ON " + table if store.backend.name == "postgresql" else "")


def test_a_dropped_trigger_is_named_and_repaired(store_target: str) -> None:
    store, runs = populated(store_target)
    with store:
        store.record_provider_call(runs["root"], call(7))
        plant(
            store,
            drop_trigger(store, "hs_run_call_tokens_insert", "provider_calls"),
            drop_trigger(store, "hs_run_call_tokens_run_delete", "runs"),
        )
        assert kinds(store.check()) == [
            ("missing_trigger", "provider_calls", ("hs_run_call_tokens_insert",)),
            ("missing_trigger", "runs", ("hs_run_call_tokens_run_delete",)),
        ]
        store.record_provider_call(runs["root"], call(5))  # not counted
        drifted = store.check().of(K.RUN_TOKENS)
        assert [(f.table, f.rows) for f in drifted] == [("hs_run_call_tokens", (runs["root"],))]
        assert "kept 7, provider calls sum 12" in drifted[0].detail, drifted[0].detail
        repaired = store.repair()
        assert repaired.after.healthy, repaired.after
        assert any("hs_run_call_tokens_insert" in line for line in repaired.done)
        assert "recounted the token totals of provider calls of 1 run" in repaired.done
        store.record_provider_call(runs["root"], call(3))
        assert store.check().healthy  # the rebuilt trigger counts again


def test_an_edited_total_is_named_with_both_numbers_and_recounted(store_target: str) -> None:
    store, runs = populated(store_target)
    with store:
        store.record_provider_call(runs["root"], call(7))
        store.record_provider_call(runs["child"], call(9))
        plant(
            store,
            f"UPDATE hs_run_call_tokens SET total = {I64_MAX} WHERE run_id = {runs['root']}",
            f"DELETE FROM hs_run_call_tokens WHERE run_id = {runs['child']}",
        )
        with pytest.raises(IntegerOverflowError):  # the door trusts the kept total
            store.record_provider_call(runs["root"], call(1))
        store.record_provider_call(runs["child"], call(1))  # no row: the calls summed
        report = store.check()
        assert kinds(report) == [
            ("run_tokens", "hs_run_call_tokens", tuple(sorted((runs["root"], runs["child"]))))
        ]
        finding = report.findings[0]
        assert finding.count == 2 and finding.repairable
        assert f"run {runs['root']} kept {I64_MAX}, provider calls sum 7" in finding.detail
        assert f"run {runs['child']} kept 1, provider calls sum 10" in finding.detail
        repaired = store.repair()
        assert repaired.after.healthy, repaired.after
        store.record_provider_call(runs["root"], call(1))  # taken again


def test_a_run_without_calls_keeps_no_row_and_a_stray_total_is_named(store_target: str) -> None:
    store, _ = populated(store_target)
    with store:
        lone = store.start_run("no calls", "f")
        assert store.check().healthy
        plant(store, f"INSERT INTO hs_run_call_tokens (run_id, total) VALUES ({lone}, 4)")
        assert kinds(store.check()) == [("run_tokens", "hs_run_call_tokens", (lone,))]
        assert store.repair().after.healthy
