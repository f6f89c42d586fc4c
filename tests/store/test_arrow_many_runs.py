"""`Store.arrow(table, runs=[…])` reads every run asked for, however many: the ids go to the
database as one parameter (past PostgreSQL's driver limit of 65,535 parameters and SQLite's
32,766), the rows in key order as for a few runs, on both backends and both APIs."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from support.rows import execute

from harness_store import Store

PAST_THE_LIMIT = 65_536 + 100
"""More runs than PostgreSQL's driver sends parameters in one statement."""

SERIES = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {count}) "
    "SELECT {columns} FROM n"
)
"""`count` rows numbered from 1, built by the database in one statement (both backends)."""


@pytest.fixture
def many_runs(store: Store) -> tuple[Store, list[int]]:
    """A store of `PAST_THE_LIMIT` runs, two steps each, written in two statements; and the
    ids of its runs."""
    execute(
        store,
        text(
            "INSERT INTO runs (id, goal, file, depth, status, started_at) "
            + SERIES.format(
                count=PAST_THE_LIMIT,
                columns="i, 'g', 'f', 0, 'running', '2026-01-01T00:00:00.000Z'",
            )
        ),
    )
    execute(
        store,
        text(
            "INSERT INTO steps (run_id, step, decision, result, tokens) "
            + SERIES.format(
                count=2 * PAST_THE_LIMIT,
                columns="(i + 1) / 2, 2 - i % 2, 'd', 'ok', i",
            )
        ),
    )
    return store, list(range(1, PAST_THE_LIMIT + 1))


def test_every_run_asked_for_is_read(many_runs: tuple[Store, list[int]]) -> None:
    store, ids = many_runs
    asked = [*ids[::-1], 10**12]  # any order, and one the store has not
    runs = store.arrow("runs", runs=asked, columns=["id"])
    assert runs.column("id").to_pylist() == ids, "every run once, in key order"
    steps = store.arrow("steps", runs=asked, columns=["run_id", "step", "tokens"])
    assert steps.num_rows == 2 * PAST_THE_LIMIT
    assert steps.column("tokens").to_pylist() == list(range(1, 2 * PAST_THE_LIMIT + 1))
    assert steps.column("run_id").to_pylist()[-2:] == [PAST_THE_LIMIT] * 2


def test_a_few_runs_among_many_read_theirs_alone(many_runs: tuple[Store, list[int]]) -> None:
    store, ids = many_runs
    some = [ids[-1], 7, 7, ids[40_000]]
    steps = store.arrow("steps", runs=some, columns=["run_id", "step"])
    kept = sorted({7, ids[40_000], ids[-1]})
    assert steps.to_pylist() == [{"run_id": r, "step": n} for r in kept for n in (1, 2)]
    assert store.arrow("steps", runs=[], columns=["run_id"]).num_rows == 0


def test_the_filter_is_one_parameter(
    store_target: str, new_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However many runs are asked for, the statement carries one parameter for them."""
    new_store.place(store_target)
    store = Store.open(store_target)
    sent: list[int] = []
    connector = type(store._connector)
    original = connector._bound

    def counting(self: Any, statement: Any, values: Any = None) -> Any:
        sql, params = original(self, statement, values)
        sent.append(len(params))
        return sql, params

    monkeypatch.setattr(connector, "_bound", counting)
    with store:
        store.arrow("steps", runs=range(1, 10))
        store.arrow("steps", runs=range(1, PAST_THE_LIMIT))
    assert sent == [1, 1]
