"""The reads an export makes (`TraceExportMixin`) on both backends, and the argument checks,
without a receiver: which runs `since` and `run_ids` choose, pages, and the stamps compared
as text."""

from __future__ import annotations

import pytest
from sqlalchemy import update
from support import rows

from harness_store import Store
from harness_store import models as m
from harness_store.errors import InvalidValueError
from harness_store.otel import since_stamp, traces_url
from harness_store.otel.endpoint import shown_url
from harness_store.otel.exporter import walk_runs
from harness_store.store.trace_export import TraceExport

from .trees import build_tree


@pytest.mark.slow_on("postgresql")
def test_span_runs_pages_since_and_ids(store_target: str) -> None:
    with Store.open(store_target) as store:
        roles = build_tree(store)
        late = store.start_run("a later run", "/repo")
        everything = [r.id for r in TraceExport(store).runs()]
        assert everything == sorted(store.runs())
        assert [r.id for r in TraceExport(store).runs(after=roles["a"], limit=2)] == [
            roles["g"],
            roles["b"],
        ]
        stamp = TraceExport(store).run(late).started_at
        assert stamp is not None
        assert [r.id for r in TraceExport(store).runs(since=since_stamp(stamp))] == [late]
        assert TraceExport(store).runs(since=since_stamp("2999-01-01")) == []
        rows.execute(store, update(m.Run).where(m.Run.id == late).values(
            started_at="2999-12-07 06:50:00"))  # fmt: skip
        assert [r.id for r in TraceExport(store).runs(since=since_stamp("2999-12-07T00"))] == [late]
        assert TraceExport(store).runs(since=since_stamp("2999-12-07 23:59")) == []
        tree = [r.id for r in walk_runs(store, since=None, run_ids=[roles["a"]])]
        assert tree == sorted([roles["a"], roles["g"]])
        child = TraceExport(store).run(roles["a"])
        assert child is not None
        assert (child.parent_run_id, child.spawn_step, child.spawn_name) == (
            roles["root"],
            2,
            "tester",
        )
        assert child.outcome == "success" and child.success is True
        root = TraceExport(store).run(roles["root"])
        assert root is not None and root.session_id is not None
        calls = TraceExport(store).provider_calls(roles["b"])
        assert [c.failure for c in calls] == [None, None, "rate_limited"]
        assert all(c.at for c in calls)
        kinds = {row.table for row in TraceExport(store).event_rows(roles["root"])}
        assert {
            "policy_events",
            "pending_approvals",
            "sandbox_events",
            "checkpoint_events",
        } <= kinds


def test_since_is_written_as_the_store_writes_its_stamps() -> None:
    assert since_stamp("2026-08-01") == "2026-08-01T00:00:00.000Z"
    assert since_stamp("2026-08-01 14:00") == "2026-08-01T14:00:00.000Z"
    assert since_stamp("2026-08-01T16:00:00+02:00") == "2026-08-01T14:00:00.000Z"
    with pytest.raises(InvalidValueError):
        since_stamp("yesterday")


def test_endpoints() -> None:
    assert traces_url("http://127.0.0.1:6006") == "http://127.0.0.1:6006/v1/traces"
    assert (
        traces_url("https://h/api/public/otel/v1/traces") == "https://h/api/public/otel/v1/traces"
    )
    assert shown_url("https://user:pw@h:4318/v1/traces") == "https://h:4318/v1/traces"
    with pytest.raises(InvalidValueError):
        traces_url("127.0.0.1:4318")
