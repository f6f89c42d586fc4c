"""`check` and `repair` of hs6's run token totals (`hs_run_tokens`, which the step door reads):
a dropped trigger, and a kept total that disagrees with the run's steps (a store someone edited,
a trigger dropped while steps were written), are named with the run and both numbers; `repair`
puts the triggers back and recounts the totals, after which the door is exact again."""

from __future__ import annotations

import pytest

from harness_store import StepRecord, Store
from harness_store.errors import IntegerOverflowError
from harness_store.records.health import FindingKind

from .checkkit import kinds, plant, populated

K = FindingKind
I64_MAX = 2**63 - 1


def one_token(step: int) -> StepRecord:
    return StepRecord.new(step, "act", "ok").with_trace("p", "", 1)


def drop_trigger(store: Store, name: str, table: str) -> str:
    return f"DROP TRIGGER {name}" + (" ON " + table if store.backend.name == "postgresql" else "")


def test_a_dropped_trigger_is_named_and_repaired(store_target: str) -> None:
    store, runs = populated(store_target)
    with store:
        plant(
            store,
            drop_trigger(store, "hs_run_tokens_insert", "steps"),
            drop_trigger(store, "hs_run_tokens_run_delete", "runs"),
        )
        report = store.check()
        assert kinds(report) == [
            ("missing_trigger", "runs", ("hs_run_tokens_run_delete",)),
            ("missing_trigger", "steps", ("hs_run_tokens_insert",)),
        ]
        assert all(f.repairable for f in report.findings)
        # steps written meanwhile are not counted: the total now disagrees
        store.checkpoint_step(runs["root"], StepRecord.new(4, "act", "ok").with_trace("p", "", 7))
        drifted = store.check().of(K.RUN_TOKENS)
        assert [f.rows for f in drifted] == [(runs["root"],)]
        assert "kept 15" in drifted[0].detail and "steps sum 22" in drifted[0].detail
        repaired = store.repair()
        assert repaired.after.healthy, repaired.after
        assert any("hs_run_tokens_insert" in line for line in repaired.done)
        assert any("token totals of 1 run" in line for line in repaired.done), repaired.done
        store.checkpoint_step(runs["root"], StepRecord.new(5, "act", "ok").with_trace("p", "", 3))
        assert store.check().healthy  # the rebuilt trigger counts again


def test_an_edited_total_is_named_with_both_numbers_and_recounted(store_target: str) -> None:
    store, runs = populated(store_target)
    with store:
        lone = store.start_run("no steps", "f")
        plant(
            store,
            f"UPDATE hs_run_tokens SET total = {I64_MAX} WHERE run_id = {runs['root']}",
            f"DELETE FROM hs_run_tokens WHERE run_id = {runs['child']}",
            f"UPDATE hs_run_tokens SET total = NULL WHERE run_id = {lone}",
        )
        with pytest.raises(IntegerOverflowError):  # the door trusts the kept total
            store.checkpoint_step(runs["root"], one_token(4))
        report = store.check()
        assert kinds(report) == [
            ("run_tokens", "hs_run_tokens", tuple(sorted((runs["root"], runs["child"], lone))))
        ]
        finding = report.findings[0]
        assert finding.count == 3 and finding.repairable
        assert f"run {runs['root']} kept {I64_MAX}, steps sum 15" in finding.detail
        assert f"run {runs['child']} kept none, steps sum 15" in finding.detail
        assert f"run {lone} kept unknown, steps sum 0" in finding.detail
        repaired = store.repair()
        assert repaired.after.healthy, repaired.after
        store.checkpoint_step(runs["root"], one_token(4))  # taken again


def test_a_total_past_the_limit_is_rightly_unknown(store_target: str) -> None:
    """A run whose steps (written by another writer) sum past 2⁶³−1 keeps NULL: no finding of
    the totals (the value check names nothing either: each step fits)."""
    store, _ = populated(store_target)
    with store:
        run = store.start_run("big", "f")
        store.checkpoint_step(run, StepRecord.new(1, "a", "ok").with_trace("p", "", I64_MAX))
        plant(
            store,
            "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
            f"VALUES ({run}, 2, 'a', 'ok', '', '', 5)",
            f"INSERT INTO checkpoint_events (run_id, step, kind) VALUES ({run}, 2, 'checkpoint')",
        )
        assert not store.check().of(K.RUN_TOKENS)


def test_an_altered_trigger_is_named_and_rebuilt(store_target: str) -> None:
    store, runs = populated(store_target)
    with store:
        if store.backend.name == "postgresql":  # the function it runs, replaced
            altered = (
                "CREATE OR REPLACE FUNCTION hs_run_tokens_inserted() RETURNS trigger "
                "LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$"
            )
            plant(store, altered)
        else:
            plant(
                store,
                "DROP TRIGGER hs_run_tokens_insert",
                "CREATE TRIGGER hs_run_tokens_insert AFTER INSERT ON steps FOR EACH ROW "
                "BEGIN SELECT 1; END",
            )
        assert kinds(store.check()) == [("trigger_differs", "steps", ("hs_run_tokens_insert",))]
        store.checkpoint_step(runs["root"], one_token(4))  # not counted
        assert [f.rows for f in store.check().of(K.RUN_TOKENS)] == [(runs["root"],)]
        repaired = store.repair()
        assert repaired.after.healthy, repaired.after
        assert "rebuilt trigger hs_run_tokens_insert on steps" in repaired.done
        store.checkpoint_step(runs["root"], one_token(5))
        assert store.check().healthy  # the rebuilt trigger counts again
