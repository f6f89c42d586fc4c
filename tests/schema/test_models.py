"""The declarative models: navigable over a real store, and the same shape as the chain."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import create_engine, insert, select
from sqlalchemy.orm import Session
from support import legacy

from harness_store import PolicyEvent, StepRecord, Store, models
from harness_store.models.run_tokens import RUN_TOKENS_METADATA
from harness_store.models.spend import SPEND_METADATA
from harness_store.schema import migrate


def test_relationships_navigate_a_run_and_its_tree(store_target: str) -> None:
    with Store.open(store_target) as store:
        root = store.start_run("root", "f")
        child = store.start_child_run("child", "f", root, 1)
        store.checkpoint_step(root, StepRecord.new(2, "second", "ok"))
        store.checkpoint_step(root, StepRecord.new(1, "first", "ok"))
        store.record_event(root, PolicyEvent.refusal(1, "write", "secret"))
        store.record_run_policy(
            root, {"layers": [], "defaults": {"read": "allow", "write": "ask", "exec": "ask"}}
        )
        store.finish_run(root, "success")
        engine = store.engine
        with Session(engine) as session:
            run = session.scalars(select(models.Run).where(models.Run.id == root)).one()
            assert [s.decision for s in run.steps] == ["first", "second"]
            assert [c.id for c in run.children] == [child]
            assert run.children[0].parent is not None and run.children[0].parent.id == root
            assert run.outcome_row is not None and run.outcome_row.success == 1
            assert run.policy is not None and run.policy.policy.startswith('{"layers":[],')
            assert [e.target for e in run.policy_events] == ["secret"]
            assert [e.step for e in run.checkpoint_events] == [2, 1]
            assert run.steps[0].run.id == root


def test_models_build_the_same_tables_as_the_chain(tmp_path: Path) -> None:
    """`Store.memory()` builds from the models; a file store is built by the chain."""
    chained = tmp_path / "chain.sqlite3"
    migrate.upgrade(chained)
    direct = tmp_path / "models.sqlite3"
    engine = create_engine(f"sqlite:///{direct}")
    models.Base.metadata.create_all(engine)
    SPEND_METADATA.create_all(engine)  # hs3's own tables, outside the models' metadata
    RUN_TOKENS_METADATA.create_all(engine)  # hs6's, likewise
    engine.dispose()
    shapes = []
    for path in (chained, direct):
        conn = sqlite3.connect(path)
        shapes.append(legacy.table_shapes(conn))
        indexes = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'hs_%' ORDER BY 1"
        ).fetchall()
        assert [name for (name,) in indexes] == sorted(models.HARNESS_INDEXES)
        conn.close()
    assert shapes[0] == shapes[1]


def test_relationships_of_the_later_tables_navigate(store_target: str) -> None:
    """Rows of 0.18–0.65 tables are reachable from their run, session and handle."""
    with Store.open(store_target) as store:
        run = store.start_run("root", "f")
        engine = store.engine
    with engine.begin() as conn:
        conn.execute(
            insert(models.table_of(models.ProviderCall)),
            [
                {"run_id": run, "step": 1, "attempt": n, "provider": "p", "latency_ms": 5}
                for n in (1, 2)
            ],
        )
        conn.execute(
            insert(models.table_of(models.Session)), [{"id": 7, "root": "/r", "head_turn_id": 3}]
        )
        conn.execute(
            insert(models.table_of(models.SessionTurn)),
            [{"id": 3, "session_id": 7, "run_id": run, "prompt": "hi"}],
        )
        conn.execute(
            insert(models.table_of(models.ProcessHandle)),
            [{"run_id": run, "handle": 1, "step": 1, "line": "make", "state": "running"}],
        )
        conn.execute(
            insert(models.table_of(models.HandleOutput)),
            [{"run_id": run, "handle": h, "step": 1, "chunk": f"out {h}"} for h in (1, 2)],
        )
        conn.execute(
            insert(models.table_of(models.StepTurn)), [{"run_id": run, "step": 1, "calls": "[]"}]
        )
    with Session(engine) as session:
        row = session.scalars(select(models.Run).where(models.Run.id == run)).one()
        assert [c.attempt for c in row.provider_calls] == [1, 2]
        assert [t.calls for t in row.step_turns] == ["[]"]
        (handle,) = row.process_handles
        assert [o.chunk for o in handle.output] == ["out 1"]
        chat = session.get(models.Session, 7)
        assert chat is not None and chat.head is not None and chat.head.run.id == run
        assert [t.prompt for t in chat.turns] == ["hi"]
        stamp = chat.created_at
        assert len(stamp) == 24 and stamp[10] == "T" and stamp.endswith("Z")
    engine.dispose()
