"""Bad input: files that are not stores, and values that cannot be kept.

A path that is not a usable run store gets a clear, typed error from `Store.open` (with and
without upgrading) and from `alembic upgrade head` a non-zero exit with that error's message on
one `FAILED:` line, as Alembic tells its own errors, and no traceback — and the file's bytes
stay exactly as they were, with nothing (-wal, -shm, backup) created beside
it. Values are stored verbatim or refused with `InvalidValueError` before anything is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from support import legacy
from support.processes import alembic_argv, alembic_fails
from support.shared import FIXTURES, in_newest_memory_order

from harness_store import StepRecord, Store
from harness_store.errors import (
    ForeignDatabaseError,
    InvalidValueError,
    NewerFormatError,
    NotADatabaseError,
    StoreAccessError,
    StoreConnectionError,
    StoreError,
    StoreNotFoundError,
    UpgradeRequiredError,
)
from harness_store.formats import MEMORY_MAX_ENTRY_CHARS, MEMORY_TRUNCATED

Maker = Callable[[Path, Callable[[str], Path]], Path]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot(directory: Path) -> list[tuple[Any, ...]]:
    """Every entry of `directory` with its mode, size and content hash (recursively)."""
    entries = []
    for entry in sorted(directory.rglob("*")):
        info = entry.stat()
        digest = sha256(entry) if entry.is_file() else None
        entries.append((str(entry.relative_to(directory)), info.st_mode, info.st_size, digest))
    return entries


@pytest.fixture(scope="module", autouse=True)
def originals_never_change() -> Iterator[None]:
    """The shared fixture stores are only ever copied: their bytes and their directory stay
    exactly as they were."""
    before = snapshot(FIXTURES) if FIXTURES.exists() else None
    yield
    if before is not None:
        assert snapshot(FIXTURES) == before


# --- bad files -------------------------------------------------------------------------------


def not_sqlite(directory: Path, copy: Callable[[str], Path]) -> Path:
    path = directory / "notes.sqlite3"
    path.write_text("this is a text file, not a run store\n" * 200)
    return path


def random_bytes(directory: Path, copy: Callable[[str], Path]) -> Path:
    path = directory / "noise.sqlite3"
    path.write_bytes(random.Random(7).randbytes(64 * 1024))
    return path


def moved_fixture(directory: Path, copy: Callable[[str], Path], name: str) -> Path:
    source = copy(name)
    path = directory / source.name
    shutil.move(source, path)
    return path


def truncated_half(directory: Path, copy: Callable[[str], Path]) -> Path:
    path = moved_fixture(directory, copy, "io-harness-0.22.0/populated")
    os.truncate(path, path.stat().st_size // 2)
    return path


def truncated_header(directory: Path, copy: Callable[[str], Path]) -> Path:
    path = moved_fixture(directory, copy, "io-harness-0.29.0/aggregates")
    os.truncate(path, 60)
    return path


def a_directory(directory: Path, copy: Callable[[str], Path]) -> Path:
    path = directory / "runs.sqlite3"
    path.mkdir()
    (path / "inside.txt").write_text("a directory named like a store")
    return path


def read_only(directory: Path, copy: Callable[[str], Path]) -> Path:
    path = moved_fixture(directory, copy, "io-harness-0.22.0/populated")
    path.chmod(0o444)
    return path


def read_only_at_head(directory: Path, copy: Callable[[str], Path]) -> Path:
    path = directory / "head.sqlite3"
    with Store.open(path) as store:
        store.start_run("a run", "f.txt")
    path.chmod(0o444)
    return path


def scripted(path: Path, script: str) -> Path:
    """A SQLite file `script` wrote, by another application."""
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript(script)
    return path


def other_application(name: str, script: str) -> Maker:
    """A maker of the SQLite file `name` that another application's `script` wrote."""

    def make(directory: Path, copy: Callable[[str], Path]) -> Path:
        return scripted(directory / name, script)

    return make


def newer_format(directory: Path, copy: Callable[[str], Path]) -> Path:
    path = directory / "v8.sqlite3"
    legacy.build_lineage(path, "0.13")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 8")
    conn.close()
    return path


BAD_FILES: dict[str, tuple[Maker, type[StoreError]]] = {
    "not-sqlite": (not_sqlite, NotADatabaseError),
    "random-bytes": (random_bytes, NotADatabaseError),
    "truncated-to-half": (truncated_half, NotADatabaseError),
    "truncated-in-header": (truncated_header, NotADatabaseError),
    "directory": (a_directory, NotADatabaseError),
    "read-only": (read_only, StoreAccessError),
    "read-only-at-head": (read_only_at_head, StoreAccessError),
    "other-application": (
        other_application(
            "app.sqlite3",
            "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);"
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, total REAL);"
            "INSERT INTO users (name) VALUES ('ada'), ('bob');",
        ),
        ForeignDatabaseError,
    ),
    "other-application-with-runs": (
        other_application(
            "ci.sqlite3",
            "CREATE TABLE runs (id INTEGER PRIMARY KEY, pipeline TEXT, ok INTEGER);"
            "CREATE TABLE steps (id INTEGER PRIMARY KEY, run_id INTEGER, name TEXT);"
            "INSERT INTO runs (pipeline, ok) VALUES ('build', 1);",
        ),
        ForeignDatabaseError,
    ),
    "user-version-8": (newer_format, NewerFormatError),
}


@pytest.fixture
def bad_file(
    request: pytest.FixtureRequest, tmp_path: Path, fixture_copy: Callable[[str], Path]
) -> tuple[Path, type[StoreError]]:
    make, error = BAD_FILES[request.param]
    directory = tmp_path / "case"
    directory.mkdir()
    return make(directory, fixture_copy), error


@pytest.mark.parametrize("bad_file", list(BAD_FILES), indirect=True)
@pytest.mark.parametrize("upgrade", [True, False], ids=["upgrade", "no-upgrade"])
def test_store_open_refuses_bad_file(
    bad_file: tuple[Path, type[StoreError]], upgrade: bool
) -> None:
    path, error = bad_file
    before = snapshot(path.parent)
    with pytest.raises(error) as raised:
        Store.open(path, upgrade=upgrade)
    assert str(raised.value).strip(), "the error says what is wrong"
    assert snapshot(path.parent) == before, "the file and its directory must be untouched"


@pytest.mark.parametrize(
    "bad_file",
    # a read-only store already at the head is no bad file to `alembic upgrade`: it has
    # nothing to do and writes nothing (tests/schema/test_upgrade_safety.py)
    [name for name in BAD_FILES if name != "read-only-at-head"],
    indirect=True,
)
def test_alembic_command_refuses_bad_file(bad_file: tuple[Path, type[StoreError]]) -> None:
    path, error = bad_file
    before = snapshot(path.parent)
    with pytest.raises(error) as raised:
        Store.open(path)
    alembic_fails(alembic_argv(path), str(raised.value))
    assert snapshot(path.parent) == before, "the file and its directory must be untouched"


def test_missing_store_is_not_created_without_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "nothing-here.sqlite3"
    with pytest.raises(StoreNotFoundError):
        Store.open(path, upgrade=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("upgrade", [True, False], ids=["upgrade", "no-upgrade"])
def test_store_in_missing_directory(tmp_path: Path, upgrade: bool) -> None:
    """A path whose directory does not exist: a typed error, and no directory is created."""
    path = tmp_path / "no" / "such" / "dir" / "runs.sqlite3"
    with pytest.raises(StoreError) as raised:
        Store.open(path, upgrade=upgrade)
    assert isinstance(raised.value, StoreNotFoundError | StoreAccessError), repr(raised.value)
    assert list(tmp_path.iterdir()) == []


def test_alembic_command_in_missing_directory(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "dir" / "runs.sqlite3"
    with pytest.raises(StoreNotFoundError) as raised:
        Store.open(path)
    alembic_fails(alembic_argv(path), str(raised.value))
    assert list(tmp_path.iterdir()) == []


def test_alembic_command_with_no_server_there() -> None:
    """A PostgreSQL URL where no server listens: the typed connection error, told in one line
    (the driver's own error is not shown as a traceback)."""
    url = "postgresql+psycopg://postgres@127.0.0.1:1/nothing"
    with pytest.raises(StoreConnectionError) as raised:
        Store.open(url)
    alembic_fails(alembic_argv(url), str(raised.value))


# --- a store from a newer io-harness ---------------------------------------------------------


def upstream_0_13_tables() -> set[str]:
    """The tables io-harness 0.13's open creates (from the legacy builder, not the package)."""
    conn = sqlite3.connect(":memory:")
    try:
        legacy.open_as(conn, "0.13")
        return set(legacy.user_tables(conn))
    finally:
        conn.close()


def foreign_tables(
    path: Path, columns: dict[str, list[str]] | None = None
) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of the tables 0.13 does not know (a newer release's own), typed; `columns`
    limits them to the tables and columns a store had before an upgrade."""
    known = upstream_0_13_tables()
    conn = sqlite3.connect(path)
    try:
        if columns is None:
            columns = {
                name: names
                for name, names in legacy.column_names(conn).items()
                if name not in known
            }
        return legacy.dump(conn, columns, typed=True)
    finally:
        conn.close()


@pytest.mark.parametrize("how", ["Store.open", "alembic"])
def test_newer_io_harness_store_opens_and_reads(
    fixture_copy: Callable[[str], Path], how: str
) -> None:
    """A store written by io-harness 0.29 (tables and columns of its own) is upgraded to
    harness_store's head without touching what is not ours, and reads as 0.29 wrote it."""
    path = fixture_copy("io-harness-0.29.0/aggregates")
    expected = json.loads((FIXTURES / "io-harness-0.29.0" / "aggregates.json").read_text())
    theirs = foreign_tables(path)
    assert theirs, "the 0.29 fixture has tables of its own"
    with closing(sqlite3.connect(path)) as conn:
        their_columns = {t: c for t, c in legacy.column_names(conn).items() if t in theirs}
    if how == "alembic":
        done = subprocess.run(alembic_argv(path), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    with Store.open(path) as store:
        composition = expected["composition"]
        assert sorted(store.runs()) == composition["run_ids"]
        for run in expected["read_back"]["runs"]:
            summary = store.run_summary(run["run_id"])
            assert summary is not None
            assert (summary.outcome, summary.success) == (run["outcome"], run["success"])
            assert store.outcome(run["run_id"]) == run["outcome"]
            assert store.spent_tokens(run["run_id"]) == run["tokens"]
            kinds = [e.kind for e in store.context_events(run["run_id"])]
            assert kinds == run["context_kinds"]
        memory = store.memory_list(composition["workspace"])
        recorded = expected["read_back"]["memory"]
        newest = in_newest_memory_order(
            "io-harness-0.29.0/aggregates", composition["workspace"], recorded
        )
        assert [(m.key, m.value, m.run_id, m.step) for m in memory] == [
            (m["key"], m["value"], m["run_id"], m["step"]) for m in newest
        ]
    assert foreign_tables(path, their_columns) == theirs, "0.29's own tables must be left alone"


def test_newer_io_harness_tree_reads(fixture_copy: Callable[[str], Path]) -> None:
    path = fixture_copy("io-harness-0.29.0/interrupted")
    expected = json.loads((FIXTURES / "io-harness-0.29.0" / "interrupted.json").read_text())
    with Store.open(path) as store:
        root = expected["root_run_id"]
        assert store.tree_run_ids(root) == expected["tree_run_ids"]
        assert store.spent_tokens_tree(root) == expected["spent_tokens_tree"]
        assert store.outcome(root) == expected["root_outcome"]
        assert store.status(root) == expected["root_status"]
        assert store.last_step(root) == expected["root_last_step"]
        for child in expected["children"]:
            run_id = child["run_id"]
            assert store.parent(run_id) == root
            assert store.depth(run_id) == child["depth"]
            assert store.last_step(run_id) == child["last_step"]
            assert store.spent_tokens(run_id) == child["spent_tokens"]
            assert (store.outcome(run_id), store.status(run_id)) == (
                child["outcome"],
                child["status"],
            )


def test_newer_io_harness_store_without_upgrade_is_left_alone(
    fixture_copy: Callable[[str], Path],
) -> None:
    """Not stamped yet, so not at harness_store's head: `upgrade=False` refuses, unchanged."""
    path = fixture_copy("io-harness-0.29.0/aggregates")
    before = snapshot(path.parent)
    with pytest.raises(UpgradeRequiredError):
        Store.open(path, upgrade=False)
    assert snapshot(path.parent) == before


# --- values ----------------------------------------------------------------------------------

AWKWARD = (
    "'; DROP TABLE steps; --",
    "Robert'); DROP TABLE runs;--",
    '" OR "1"="1',
    "' OR '1'='1' /* */",
    "100% _like_ [wild]cards \\ back\\slash ESCAPE '\\'",
    "`backticks` $dollar$ $$ :named ?1 ?",
    "quote''doubled \"\" and ''' triple",
    "".join(chr(c) for c in range(1, 32)) + "\x7f" + "".join(chr(c) for c in range(0x80, 0xA0)),
    "\r\n\t\x0b\x0c\x1b[31mANSI\x1b[0m",
    "",
    " ",
    "\u202eRTL override \u200b zero width \ufeff BOM",
    "e\u0301 vs \u00e9 (not normalised)",
    "🦀" * 100 + "👩\u200d👩\u200d👧",
    '{"json": [1, 2.5, null, "x"]}',
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "runs.sqlite3") as opened:
        yield opened


def raw_rows(store: Store, sql: str, *params: object) -> list[tuple[Any, ...]]:
    path = store.url.database
    assert path
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def everything(store: Store) -> dict[str, Any]:
    """Every row of every table (typed) and the AUTOINCREMENT counters."""
    path = store.url.database
    assert path
    conn = sqlite3.connect(path)
    try:
        rows: dict[str, Any] = legacy.dump(conn, typed=True)
        rows["sqlite_sequence"] = conn.execute(
            "SELECT name, seq FROM sqlite_sequence ORDER BY name"
        ).fetchall()
        return rows
    finally:
        conn.close()


def test_awkward_text_is_stored_verbatim(store: Store) -> None:
    for i, text in enumerate(AWKWARD):
        run = store.start_run(text, text)
        record = StepRecord(1, text, text, text, text, i)
        store.checkpoint_step(run, record)
        store.set_provider(run, text)
        assert store.steps(run) == [record]
        assert store.provider(run) == text
        assert raw_rows(store, "SELECT goal, file, typeof(goal) FROM runs WHERE id = ?", run) == [
            (text, text, "text")
        ]
        store.memory_put(text, text, text, run, 1)
        entry = store.memory_get(text, text)
        assert entry is not None
        assert (entry.key, entry.value) == (text, text)
        store.finish_run(run, text)
        assert store.outcome(run) == text
        summary = store.run_summary(run)
        assert summary is not None
        assert summary.outcome == text
    # the "DROP TABLE" values did nothing
    tables = {r[0] for r in raw_rows(store, "SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "steps", "memory"} <= tables
    assert len(store.runs()) == len(AWKWARD)


def unicode_chunks(size: int = 0x10000) -> Iterator[str]:
    """Every code point but NUL and the surrogates, in chunks of `size` code points."""
    points = [c for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF]
    for start in range(0, len(points), size):
        yield "".join(map(chr, points[start : start + size]))


def test_all_of_unicode_is_stored_verbatim(store: Store) -> None:
    run = store.start_run("unicode", "u.txt")
    chunks = list(unicode_chunks())
    assert sum(map(len, chunks)) == 0x110000 - 0x800 - 1
    store.checkpoint_steps(
        run,
        [StepRecord(n, chunk[::-1], chunk, chunk[: len(chunk) // 2], "", n) for n, chunk in
         enumerate(chunks, start=1)],
    )  # fmt: skip
    read = store.steps(run)
    assert [s.result for s in read] == chunks
    assert [s.decision for s in read] == [c[::-1] for c in chunks]
    assert [s.prompt for s in read] == [c[: len(c) // 2] for c in chunks]
    # SQLite sees characters, not bytes, and the same ones.
    lengths = raw_rows(
        store,
        "SELECT length(result), typeof(result) FROM steps WHERE run_id = ? ORDER BY step",
        run,
    )
    assert lengths == [(len(c), "text") for c in chunks]
    for n, chunk in enumerate(chunks[:3]):
        store.memory_put("unicode", f"k{n}", chunk[:1500], run, 1)
        entry = store.memory_get("unicode", f"k{n}")
        assert entry is not None and entry.value == chunk[:1500]


def test_ten_megabytes_of_text(store: Store) -> None:
    unit = "ascii 'quoted' é 日本 🦀 \n"
    big = (unit * (10 * 2**20 // len(unit) + 1))[: 10 * 2**20]
    run = store.start_run(big, "big.txt")
    store.checkpoint_step(run, StepRecord(1, "read a huge file", big, big, "", 1))
    [step] = store.steps(run)
    assert step.result == big and step.prompt == big
    assert raw_rows(store, "SELECT goal = ?, length(goal) FROM runs WHERE id = ?", big, run) == [
        (1, len(big))
    ]


def test_memory_values_are_cut_as_upstream(store: Store) -> None:
    run = store.start_run("memory", "m.txt")
    cases = {
        "exact": "x" * MEMORY_MAX_ENTRY_CHARS,
        "one over": "y" * (MEMORY_MAX_ENTRY_CHARS + 1),
        "astral": "🦀" * (MEMORY_MAX_ENTRY_CHARS + 500),
        "huge": "z" * 10**6,
    }
    for key, value in cases.items():
        store.memory_put("/ws", key, value, run, 1)
    for key, value in cases.items():
        entry = store.memory_get("/ws", key)
        assert entry is not None
        if len(value) <= MEMORY_MAX_ENTRY_CHARS:
            assert entry.value == value
        else:
            keep = MEMORY_MAX_ENTRY_CHARS - len(MEMORY_TRUNCATED)
            assert entry.value == value[:keep] + MEMORY_TRUNCATED
        assert raw_rows(
            store, "SELECT length(value) FROM memory WHERE workspace = '/ws' AND key = ?", key
        ) == [(min(len(value), MEMORY_MAX_ENTRY_CHARS),)]


def test_integer_extremes_round_trip(store: Store) -> None:
    run = store.start_run("extremes", "e.txt")
    store.checkpoint_step(run, StepRecord(2**32 - 1, "max step", "ok", "", "", 2**63 - 1))
    store.checkpoint_step(run, StepRecord(0, "zero", "ok", "", "", 0))
    assert [(s.step, s.tokens) for s in store.steps(run)] == [(0, 0), (2**32 - 1, 2**63 - 1)]
    assert store.spent_tokens(run) == 2**63 - 1
    assert raw_rows(store, "SELECT typeof(tokens) FROM steps WHERE run_id = ?", run) == [
        ("integer",),
        ("integer",),
    ]


def refusals(run: int) -> dict[str, Callable[[Store], object]]:
    """Writes that must be refused with `InvalidValueError`, before anything is written."""
    ok = StepRecord(1, "ok", "ok", "", "", 1)

    def step(**changes: Any) -> StepRecord:
        values = {"step": 1, "decision": "d", "result": "r", "prompt": "", "tool_call": ""}
        values |= {"tokens": 1} | changes
        return StepRecord(**values)

    return {
        "tokens 2**63": lambda s: s.checkpoint_step(run, step(tokens=2**63)),
        "tokens 2**64": lambda s: s.checkpoint_step(run, step(tokens=2**64)),
        "tokens 10**30": lambda s: s.record(run, step(tokens=10**30)),
        "tokens -1": lambda s: s.checkpoint_step(run, step(tokens=-1)),
        "step -1": lambda s: s.checkpoint_step(run, step(step=-1)),
        "step 2**32": lambda s: s.checkpoint_step(run, step(step=2**32)),
        "step 2**63": lambda s: s.checkpoint_step(run, step(step=2**63)),
        "run_id 2**63": lambda s: s.checkpoint_step(2**63, ok),
        "run_id -2**63-1": lambda s: s.checkpoint_step(-(2**63) - 1, ok),
        "batch with one bad row": lambda s: s.checkpoint_steps(
            run, [ok, step(step=2), step(step=3, tokens=2**63), step(step=4)]
        ),
        "float tokens": lambda s: s.checkpoint_step(run, step(tokens=1.0)),
        "bool step": lambda s: s.checkpoint_step(run, step(step=True)),
        "memory step -1": lambda s: s.memory_put("/ws", "k", "v", run, -1),
        "memory run 2**63": lambda s: s.memory_put("/ws", "k", "v", 2**63, 1),
        "child depth -1": lambda s: s.start_child_run("g", "f", run, -1),
        "child parent 2**63": lambda s: s.start_child_run("g", "f", 2**63, 1),
        "spawn max_steps 2**32": lambda s: s.record_spawn(run, 1, 2, "g", "v", "n", 2**32, "[]"),
        "NUL in decision": lambda s: s.checkpoint_step(run, step(decision="a\x00b")),
        "NUL in result": lambda s: s.checkpoint_step(run, step(result="\x00")),
        "NUL in prompt": lambda s: s.checkpoint_step(run, step(prompt="p\x00")),
        "NUL in tool_call": lambda s: s.record(run, step(tool_call="\x00{}")),
        "NUL in goal": lambda s: s.start_run("goal\x00", "f"),
        "NUL in file": lambda s: s.start_run("goal", "f\x00"),
        "NUL in memory key": lambda s: s.memory_put("/ws", "k\x00", "v", run, 1),
        "NUL in memory value": lambda s: s.memory_put("/ws", "k", "v\x00", run, 1),
        "NUL in workspace": lambda s: s.memory_put("/ws\x00", "k", "v", run, 1),
        "NUL in outcome": lambda s: s.finish_run(run, "success\x00"),
        "NUL in provider": lambda s: s.set_provider(run, "\x00"),
        "NUL in policy": lambda s: s.record_run_policy(run, '{"a": "\x00"}'),
    }


REFUSALS = list(refusals(0))


@pytest.mark.parametrize("case", REFUSALS)
def test_unstorable_values_are_refused_cleanly(store: Store, case: str) -> None:
    run = store.start_run("values", "v.txt")
    store.checkpoint_step(run, StepRecord(1, "first", "ok", "", "", 1))
    before = everything(store)
    with pytest.raises(InvalidValueError):
        refusals(run)[case](store)
    assert everything(store) == before, "a refused write must write nothing"
    # and the store still works
    store.checkpoint_step(run, StepRecord(2, "second", "ok", "", "", 1))
    assert store.last_step(run) == 2


@pytest.mark.parametrize(
    "write",
    [
        lambda s, run: s.checkpoint_step(run, StepRecord(2, "d", "\ud800", "", "", 1)),
        lambda s, run: s.start_run("goal \udfff", "f"),
        lambda s, run: s.memory_put("/ws", "k", "v \udc80", run, 1),
    ],
    ids=["checkpoint_step", "start_run", "memory_put"],
)
def test_lone_surrogate_is_refused_as_invalid_value(
    store: Store, write: Callable[[Store, int], object]
) -> None:
    """A lone surrogate is a Python `str` but not Unicode text: UTF-8 cannot encode it, so
    SQLite cannot keep it. Like NUL it is a value upstream's format cannot hold — refused
    with `InvalidValueError`, nothing written."""
    run = store.start_run("values", "v.txt")
    store.checkpoint_step(run, StepRecord(1, "first", "ok", "", "", 1))
    before = everything(store)
    with pytest.raises(InvalidValueError):
        write(store, run)
    assert everything(store) == before
