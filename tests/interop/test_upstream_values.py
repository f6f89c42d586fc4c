"""Values where harness_store must do what io-harness 0.13 does, on both backends: the u64
fields upstream stores with a wrapping cast, and run policies as upstream's `Policy` reads
them. The oracle-backed twins of these tests (tests/interop/test_python_to_rust.py) check the
same values against the real upstream code."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import insert, select

from harness_store import ContextEvent, McpEvent, Store, models
from harness_store.errors import InvalidValueError, ResumeError

U64_MAX = 2**64 - 1
WRAPPED = [(0, 0), (2**63 - 1, 2**63 - 1), (2**63, -(2**63)), (U64_MAX, -1), (2**64 - 17, -17)]
"""(value upstream accepts, what its `as i64` cast stores)."""


def raw(store: Store, *columns: Any) -> list[tuple[Any, ...]]:
    with store.engine.connect() as conn:
        key = next(iter(columns[0].table.primary_key.columns))
        return [tuple(r) for r in conn.execute(select(*columns).order_by(key))]


@pytest.mark.slow_on("postgresql")
def test_mcp_millis_take_every_u64_and_store_upstreams_wrapped_value(store: Store) -> None:
    run = store.start_run("goal", "f")
    for value, _ in WRAPPED:
        store.record_mcp(run, McpEvent.called("s", "t", True).with_millis(value))
    assert [e.millis for e in store.mcp_events(run)] == [v for v, _ in WRAPPED]
    assert raw(store, models.McpEvent.millis) == [(w,) for _, w in WRAPPED]


def test_context_tokens_take_every_u64_and_store_upstreams_wrapped_value(store: Store) -> None:
    run = store.start_run("goal", "f")
    for step, (value, _) in enumerate(WRAPPED, start=1):
        store.record_context_event(run, ContextEvent.assembled(step, "d", value))
        store.record_context_reported(run, step, value)
    store.record_context_event(run, ContextEvent(9, "assembled", None, None, U64_MAX))
    events = store.context_events(run)
    assert [(e.est_tokens, e.reported_tokens) for e in events] == [
        *((v, v) for v, _ in WRAPPED),
        (None, U64_MAX),
    ]
    c = models.ContextEvent
    assert raw(store, c.est_tokens, c.reported_tokens) == [
        *((w, w) for _, w in WRAPPED),
        (None, -1),
    ]


def test_stored_negatives_read_back_unsigned(store: Store) -> None:
    run = store.start_run("goal", "f")
    with store.engine.begin() as conn:
        conn.execute(
            insert(models.McpEvent).values(run_id=run, step=1, kind="called", server="s", millis=-2)
        )
        conn.execute(
            insert(models.ContextEvent).values(
                run_id=run, step=1, kind="assembled", est_tokens=-(2**63), reported_tokens=-1
            )
        )
    assert store.mcp_events(run)[0].millis == U64_MAX - 1
    event = store.context_events(run)[0]
    assert (event.est_tokens, event.reported_tokens) == (2**63, U64_MAX)


@pytest.mark.parametrize("value", [2**64, -1, 1.5])
@pytest.mark.slow_on("postgresql")
def test_u64_fields_refuse_what_u64_cannot_hold_and_write_nothing(store: Store, value: Any) -> None:
    run = store.start_run("goal", "f")
    store.record_context_event(run, ContextEvent.assembled(1, "d", 5))
    with pytest.raises(InvalidValueError):
        store.record_mcp(run, McpEvent.called("s", "t", True).with_millis(value))
    with pytest.raises(InvalidValueError):
        store.record_context_event(run, ContextEvent.assembled(2, "d", value))
    with pytest.raises(InvalidValueError):
        store.record_context_event(run, ContextEvent(2, "assembled", None, 1, value))
    with pytest.raises(InvalidValueError):
        store.record_context_reported(run, 1, value)
    assert store.mcp_events(run) == []
    assert store.context_events(run) == [ContextEvent.assembled(1, "d", 5)]


# --- policies ----------------------------------------------------------------------------

DEFAULTS = {"read": "allow", "write": "ask", "exec": "ask", "net": "deny"}
GOOD = {"layers": [{"name": "t", "rules": [{"act": "net", "effect": "allow", "pattern": "h:1"}]}],
        "defaults": DEFAULTS}  # fmt: skip

REFUSED: dict[str, Any] = {
    "array": "[1, 2]",
    "number": "42",
    "string": '"policy"',
    "null": "null",
    "NaN": '{"layers": [], "defaults": {"read": "allow", "write": "ask", "exec": "ask"}, "x": NaN}',
    "NaN in a mapping": {"layers": [], "defaults": DEFAULTS, "x": float("nan")},
    "missing defaults": {"layers": []},
    "missing layers": {"defaults": DEFAULTS},
    "empty defaults": {"layers": [], "defaults": {}},
    "unknown effect": {"layers": [], "defaults": {**DEFAULTS, "read": "maybe"}},
    "unknown act": {"layers": [{"name": "t", "rules": [{"act": "fly", "effect": "deny",
                                                        "pattern": "*"}]}], "defaults": DEFAULTS},
    "rule without pattern": {"layers": [{"name": "t", "rules": [{"act": "read",
                                                                 "effect": "deny"}]}],
                             "defaults": DEFAULTS},
    "layer name not text": {"layers": [{"name": 1, "rules": []}], "defaults": DEFAULTS},
    "duplicate field": '{"layers": [], "layers": [], "defaults": ' + json.dumps(DEFAULTS) + "}",
    "not JSON": "{layers",
}  # fmt: skip


@pytest.mark.parametrize("policy", REFUSED.values(), ids=REFUSED.keys())
@pytest.mark.slow_on("postgresql")
def test_record_run_policy_refuses_what_upstream_cannot_read_and_writes_nothing(
    store: Store, policy: Any
) -> None:
    run = store.start_run("goal", "f")
    store.record_run_policy(run, GOOD)
    with pytest.raises(InvalidValueError):
        store.record_run_policy(run, policy)
    assert store.run_policy(run) == GOOD


def test_a_pre_0_8_policy_without_net_reads_as_network_denied(store: Store) -> None:
    """Exactly what 0.7 wrote; upstream's serde default makes `net` deny."""
    run = store.start_run("goal", "f")
    old = '{"layers":[],"defaults":{"read":"allow","write":"allow","exec":"allow"}}'
    with store.engine.begin() as conn:
        conn.execute(insert(models.RunPolicy).values(run_id=run, policy=old))
    assert store.run_policy(run) == {
        "layers": [],
        "defaults": {"read": "allow", "write": "allow", "exec": "allow", "net": "deny"},
    }


def test_a_policy_is_stored_as_upstream_serialises_it(store: Store) -> None:
    """Fields in the struct's order, unknown fields dropped, `net` filled in, compact."""
    run = store.start_run("goal", "f")
    given = {
        "note": "ignored",
        "defaults": {"net": "allow", "exec": "deny", "write": "ask", "read": "allow"},
        "layers": [{"rules": [{"pattern": "ü \"q\"", "effect": "deny", "act": "write"}],
                    "name": "tâsk"}],
    }  # fmt: skip
    store.record_run_policy(run, given)
    (stored,) = raw(store, models.RunPolicy.policy)
    assert stored == (
        '{"layers":[{"name":"tâsk","rules":'
        '[{"act":"write","effect":"deny","pattern":"ü \\"q\\""}]}],'
        '"defaults":{"read":"allow","write":"ask","exec":"deny","net":"allow"}}',
    )


def test_an_unreadable_stored_policy_raises_resume_error(store: Store) -> None:
    run = store.start_run("goal", "f")
    with store.engine.begin() as conn:
        conn.execute(insert(models.RunPolicy).values(run_id=run, policy='{"layers": []}'))
    with pytest.raises(ResumeError, match="defaults"):
        store.run_policy(run)
