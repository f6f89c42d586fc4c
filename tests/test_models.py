"""The declarative models: navigable over a real store, and the same shape as the chain."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import legacy
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from harness_store import PolicyEvent, StepRecord, Store, migrate, models


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
