"""Fast checks of the legacy-store builder itself, against the schema contract in UPSTREAM.md.

The migration tests trust `legacy` to build what each io-harness release leaves on disk, so
the builder's shapes, stamps, journal modes and value round-trips are pinned here first.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from support import legacy
from support.legacy import RELEASES

# Column declarations per table as UPSTREAM.md states them, with the release that adds each.
_ID = "id INTEGER PRIMARY KEY"
SCHEMA: dict[str, list[tuple[int, str]]] = {
    "runs": [
        (1, _ID),
        (1, "goal TEXT NOT NULL"),
        (1, "file TEXT NOT NULL"),
        (1, "outcome TEXT"),
        (3, "provider TEXT"),
        (5, "parent_run_id INTEGER"),
        (5, "depth INTEGER NOT NULL DEFAULT 0"),
        (7, "status TEXT NOT NULL DEFAULT 'running'"),
        (7, "started_at TEXT"),
    ],
    "steps": [
        (1, _ID),
        (1, "run_id INTEGER NOT NULL"),
        (1, "step INTEGER NOT NULL"),
        (1, "decision TEXT NOT NULL"),
        (1, "result TEXT NOT NULL"),
        (2, "prompt TEXT NOT NULL DEFAULT ''"),
        (2, "tool_call TEXT NOT NULL DEFAULT ''"),
        (2, "tokens INTEGER NOT NULL DEFAULT 0"),
    ],
}
_TABLES: dict[str, tuple[int, list[str]]] = {
    "policy_events": (4, [_ID, "run_id INTEGER NOT NULL", "step INTEGER NOT NULL",
                          "kind TEXT NOT NULL", "act TEXT NOT NULL", "target TEXT NOT NULL",
                          "rule TEXT", "layer TEXT", "decision TEXT", "source TEXT",
                          "performed TEXT"]),
    "pending_approvals": (4, [_ID, "run_id INTEGER NOT NULL", "step INTEGER NOT NULL",
                              "act TEXT NOT NULL", "target TEXT NOT NULL", "content TEXT",
                              "resolved TEXT"]),
    "agent_events": (5, [_ID, "run_id INTEGER NOT NULL", "step INTEGER NOT NULL",
                         "kind TEXT NOT NULL", "child_run_id INTEGER", "detail TEXT",
                         "tokens INTEGER", "remaining INTEGER"]),
    "sandbox_events": (6, [_ID, "run_id INTEGER NOT NULL", "step INTEGER NOT NULL",
                           "kind TEXT NOT NULL", "backend TEXT", "detail TEXT"]),
    "checkpoint_events": (7, [_ID, "run_id INTEGER NOT NULL", "step INTEGER NOT NULL",
                              "kind TEXT NOT NULL", "detail TEXT"]),
    "spawns": (7, [_ID, "parent_run_id INTEGER NOT NULL", "step INTEGER NOT NULL",
                   "child_run_id INTEGER NOT NULL", "goal TEXT NOT NULL",
                   "verify_file TEXT NOT NULL", "needle TEXT NOT NULL", "max_steps INTEGER",
                   "deny_write TEXT NOT NULL DEFAULT '[]'"]),
    "mcp_events": (8, [_ID, "run_id INTEGER NOT NULL", "step INTEGER NOT NULL",
                       "kind TEXT NOT NULL", "server TEXT NOT NULL", "tool TEXT", "ok INTEGER",
                       "millis INTEGER", "detail TEXT"]),
    "memory": (10, [_ID, "workspace TEXT NOT NULL", "key TEXT NOT NULL", "value TEXT NOT NULL",
                    "run_id INTEGER NOT NULL", "step INTEGER NOT NULL",
                    "created_at TEXT NOT NULL"]),
    "context_events": (10, [_ID, "run_id INTEGER NOT NULL", "step INTEGER NOT NULL",
                            "kind TEXT NOT NULL", "detail TEXT", "est_tokens INTEGER",
                            "reported_tokens INTEGER"]),
    "run_outcomes": (12, ["run_id INTEGER PRIMARY KEY", "outcome TEXT NOT NULL",
                          "success INTEGER NOT NULL", "steps INTEGER NOT NULL",
                          "tokens INTEGER NOT NULL", "duration_ms INTEGER",
                          "finished_at TEXT NOT NULL"]),
    "run_policies": (13, ["run_id INTEGER PRIMARY KEY", "policy TEXT NOT NULL"]),
    "ledger_observations": (13, [_ID, "run_id INTEGER NOT NULL", "step INTEGER NOT NULL",
                                 "kind TEXT NOT NULL", "target TEXT", "text TEXT NOT NULL"]),
}  # fmt: skip
SCHEMA.update({t: [(v, c) for c in cols] for t, (v, cols) in _TABLES.items()})
WITHOUT_AUTOINCREMENT = {
    "memory",
    "context_events",
    "ledger_observations",
    "run_outcomes",
    "run_policies",
}
CLOCK_COLUMNS = {"started_at", "created_at", "finished_at", "duration_ms"}


def minor(release: str) -> int:
    """Return a release's minor number."""
    return int(release.split(".")[1])


def expected_shapes(release: str) -> dict[str, list[tuple[Any, ...]]]:
    """Turn UPSTREAM.md's declarations into `table_shapes` rows for one release."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for table, cols in SCHEMA.items():
        specs = [spec for v, spec in cols if v <= minor(release)]
        if not specs or cols[0][0] > minor(release):
            continue
        rows = []
        for spec in specs:
            name, type_, *_ = spec.split()
            default = spec.split(" DEFAULT ")[1] if " DEFAULT " in spec else None
            rows.append((name, type_, int("NOT NULL" in spec), default, int("PRIMARY" in spec)))
        out[table] = rows
    return dict(sorted(out.items()))


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    """A path for a fresh store file."""
    yield tmp_path / "store.sqlite3"


def connect(path: Path) -> sqlite3.Connection:
    """Open a built store for inspection."""
    return sqlite3.connect(path)


def pragma(path: Path, name: str) -> Any:
    """Read one PRAGMA value from a store file."""
    with closing(connect(path)) as conn:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]


def test_open_statements_follow_upstream_order() -> None:
    """The CREATE text grows columns in the releases upstream gave them; the stamp is last."""
    for r in RELEASES:
        stmts = legacy.open_statements(r)
        assert ("provider" in stmts[0]) is (minor(r) >= 3)
        assert ("prompt" in stmts[1]) is (minor(r) >= 2)
        assert (stmts[-1] == "PRAGMA user_version = 7") is (minor(r) >= 7)
        assert all(s.startswith(("CREATE", "ALTER", "PRAGMA")) for s in stmts)
    assert legacy.torn_points("0.5") == [9, 10]
    assert legacy.torn_points("0.13") == [21]
    assert legacy.torn_points("0.9") == []


@pytest.mark.parametrize("release", RELEASES)
def test_born_at_has_exactly_the_upstream_shape(db: Path, release: str) -> None:
    """A store born at X has X's tables and columns, no more, and AUTOINCREMENT where due."""
    legacy.build_born_at(db, release)
    with closing(connect(db)) as conn:
        assert legacy.table_shapes(conn) == expected_shapes(release)
        for table, sql in legacy.create_texts(conn).items():
            assert ("AUTOINCREMENT" in sql) is (table not in WITHOUT_AUTOINCREMENT)
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'index' "
                            "AND sql IS NOT NULL").fetchone()[0] == 0  # fmt: skip


@pytest.mark.parametrize("release", RELEASES)
def test_lineage_matches_born_at_except_create_text(tmp_path: Path, release: str) -> None:
    """ALTERs append in CREATE order, so shapes agree; only runs/steps CREATE text differs."""
    born, grown = tmp_path / "born.sqlite3", tmp_path / "grown.sqlite3"
    legacy.build_born_at(born, release)
    legacy.build_lineage(grown, release)
    with closing(connect(born)) as a, closing(connect(grown)) as b:
        assert legacy.table_shapes(a) == legacy.table_shapes(b)
        ta, tb = legacy.create_texts(a), legacy.create_texts(b)
        expected = {"steps"} if minor(release) >= 2 else set()
        expected |= {"runs"} if minor(release) >= 3 else set()
        assert {t for t in ta if ta[t] != tb[t]} == expected
        if minor(release) >= 3:
            assert ", provider TEXT" in tb["runs"]  # appended by ALTER after the closing ")"
    for name in ("user_version", "journal_mode"):
        assert pragma(born, name) == pragma(grown, name)


@pytest.mark.parametrize("release", RELEASES)
def test_user_version_and_wal(db: Path, release: str) -> None:
    """user_version is 7 from 0.7; file stores are WAL from 0.12, in-memory ones never."""
    legacy.build_born_at(db, release)
    assert pragma(db, "user_version") == (7 if minor(release) >= 7 else 0)
    assert pragma(db, "journal_mode") == ("wal" if minor(release) >= 12 else "delete")
    with closing(sqlite3.connect(":memory:")) as mem:
        legacy.open_as(mem, release)
        legacy.write_rows(mem, release)
        assert mem.execute("PRAGMA journal_mode").fetchone()[0] == "memory"


TORN = [(r, k) for r in RELEASES for k in legacy.torn_points(r)]


@pytest.mark.parametrize(("release", "stop_after"), TORN)
def test_torn_store_is_between_releases(tmp_path: Path, release: str, stop_after: int) -> None:
    """A killed open leaves a shape between X-1 and X; finishing X's open then heals it."""
    torn, whole = tmp_path / "torn.sqlite3", tmp_path / "whole.sqlite3"
    legacy.build_torn(torn, release, stop_after)
    legacy.build_lineage(whole, release)
    before = expected_shapes(RELEASES[minor(release) - 2]) if minor(release) > 1 else {}
    after = expected_shapes(release)
    with closing(connect(torn)) as conn:
        got = legacy.table_shapes(conn)
        state = (got, conn.execute("PRAGMA user_version").fetchone()[0])
    assert set(before) <= set(got) <= set(after)
    for table, cols in got.items():
        assert cols[: len(before.get(table, []))] == before.get(table, [])
        assert cols == after[table][: len(cols)]
    assert got != before
    assert state != (after, 7 if minor(release) >= 7 else 0)
    with closing(sqlite3.connect(torn)) as conn:
        legacy.open_as(conn, release)
        healed = legacy.table_shapes(conn)
    with closing(connect(whole)) as conn:
        assert healed == legacy.table_shapes(conn)


@pytest.mark.parametrize("release", ["0.1", "0.7", "0.13"])
def test_dump_round_trips_awkward_values(db: Path, release: str) -> None:
    """Quotes, SQL, unicode, NUL, empty, NULL, 100 KB text and 2**53+1 come back exactly."""
    rows = legacy.build_born_at(db, release, seed=3)
    assert set(rows.texts) == set(legacy.AWKWARD)
    with closing(connect(db)) as conn:
        dumped = legacy.dump(conn)
        typed = legacy.dump(conn, typed=True)
    cells = [v for table in dumped.values() for row in table for v in row]
    texts = [v for v in cells if isinstance(v, str)]
    for value in legacy.AWKWARD:
        assert any(value in t for t in texts), value  # verbatim inside some cell
    assert legacy.long_text(3) in texts
    assert None in cells
    if minor(release) >= 2:  # 0.1 has no tokens column
        assert legacy.BIG in cells
        assert ("integer", legacy.BIG) in {cell for t in typed.values() for r in t for cell in r}
    assert "alembic_version" not in dumped and "sqlite_sequence" not in dumped


def test_rows_are_deterministic_from_the_seed(tmp_path: Path) -> None:
    """The same seed writes the same rows (clock stamps aside); another seed differs."""

    def scrubbed(path: Path) -> dict[str, list[tuple[Any, ...]]]:
        with closing(connect(path)) as conn:
            cols = legacy.column_names(conn)
            keep = {t: [c for c in cs if c not in CLOCK_COLUMNS] for t, cs in cols.items()}
            return legacy.dump(conn, keep)

    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        legacy.build_lineage(tmp_path / name, "0.13", seed=seed)
    assert scrubbed(tmp_path / "a") == scrubbed(tmp_path / "b")
    assert scrubbed(tmp_path / "a") != scrubbed(tmp_path / "c")


@pytest.mark.parametrize("release", ["0.1", "0.4", "0.7", "0.10", "0.12", "0.13"])
def test_reopening_keeps_rows_and_read_answers(db: Path, release: str) -> None:
    """Re-running X's open, or the next release's, keeps every row and X's read answers."""
    rows = legacy.build_lineage(db, release)
    with closing(connect(db)) as conn:
        cols = legacy.column_names(conn)
        before = legacy.dump(conn, typed=True)
        answers = legacy.read_answers(conn, release, rows)
    nxt = RELEASES[min(minor(release), len(RELEASES) - 1)]
    for again in (release, nxt):
        with closing(connect(db)) as conn:
            legacy.open_as(conn, again)
            assert legacy.dump(conn, cols, typed=True) == before
            assert legacy.read_answers(conn, release, rows) == answers
    assert len(answers) > 2
    with closing(connect(db)) as conn:
        assert legacy.read_answers(conn, release, rows.run_ids).keys() <= answers.keys()
