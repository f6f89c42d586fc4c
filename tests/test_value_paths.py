"""The table of docs/guides/values.md is true: for each kind of value a SQLite store can hold
that its column's type does not (written with `sqlite3` directly, as a foreign writer leaves
it), each path that moves or shows data does what the table's cell says — `exact` (the value
arrives, or is shown, as it is), `refused` (one line or a typed error naming the table, the
row and the column; nothing written), `quarantined` (its run is held in the centre's
quarantine, byte-exact, and named), `named` (`check` reports it as a finding).

The table is parsed from the page, so the page cannot drift from what the paths do. The
PostgreSQL column runs with the `pg_url` fixture. A sync's centre holds a new store before
the sync (a copy of one made once, `NEW_STORE`): what the sync does with the value is the
claim, and a centre sync makes itself is the same store; a copy makes its target, as that
is part of what the copy does."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from otel.sink import Sink
from sqlalchemy import create_engine, text
from support.clirun import run_in_process
from support.foreign_values import foreign_store as write_foreign
from support.new_stores import NEW_STORE

from harness_store import Store
from harness_store.analytics.dataset import read_dataset
from harness_store.formats import JSON
from harness_store.sync import quarantined

PAGE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "values.md"
CELLS = ("exact", "refused", "quarantined", "named", "healthy", "replaced", "unnamed", "unread")


@dataclass(frozen=True)
class Kind:
    """A kind of foreign value: where it is written and what it is."""

    table: str
    column: str
    sql: str
    """The value as SQL (`X'…'` a BLOB, `CAST(X'…' AS TEXT)` text of those bytes)."""
    python: Any
    """The value as an exact read gives it back."""


KINDS: dict[str, list[Kind]] = {
    "a NUL character in a text": [Kind("steps", "result", "CAST(X'610062' AS TEXT)", "a\0b")],
    "a text whose bytes are not UTF-8": [
        Kind("steps", "result", "CAST(X'70FF71' AS TEXT)", b"p\xffq")
    ],
    "a BLOB in a TEXT column": [Kind("steps", "result", "X'00FF10'", b"\x00\xff\x10")],
    "text in an INTEGER column": [Kind("steps", "tokens", "'many'", "many")],
    "a REAL (a fraction, Infinity) in an INTEGER column": [
        Kind("steps", "tokens", "1.5", 1.5),
        Kind("steps", "tokens", "9e999", math.inf),
    ],
    "NaN or Infinity in a tool call's JSON": [
        Kind("steps", "tool_call", "'read_file:{\"n\":NaN}'", 'read_file:{"n":NaN}'),
        Kind("steps", "tool_call", "'read_file:{\"n\":Infinity}'", 'read_file:{"n":Infinity}'),
    ],
    "a lease TTL past what a time stamp can hold": [
        Kind("run_leases", "ttl_secs", str(2**40), 2**40)
    ],
}


def table_of_page() -> tuple[list[str], dict[str, dict[str, str]]]:
    """The page's value × path table: its paths (the header) and each kind's cells."""
    lines = [ln for ln in PAGE.read_text(encoding="utf-8").splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = dict(zip(header[1:], cells[1:], strict=True))
    return header[1:], rows


def claims() -> list[tuple[str, str, str]]:
    _, rows = table_of_page()
    return [(kind, path, cell) for kind, cells in rows.items() for path, cell in cells.items()]


def plain_cell(cell: str) -> str:
    """A cell's claim: its first word of `CELLS` (the rest is a note)."""
    word = re.sub(r"[^a-z]", " ", cell.lower()).split()[0]
    assert word in CELLS, f"a cell of {PAGE.name} says {cell!r}"
    return word


# --- the store -------------------------------------------------------------------------------


def foreign_store(path: Path, kind: Kind) -> int:
    """`support.foreign_values.foreign_store` holding `kind`'s value; the run's id."""
    return write_foreign(path, kind.table, kind.column, kind.sql)


def cell_of(path: Path, kind: Kind) -> tuple[str, str]:
    """`typeof` and `hex` of `kind`'s cell in the SQLite store at `path`."""
    with closing(sqlite3.connect(path)) as conn:
        row = conn.execute(f"SELECT typeof({kind.column}), hex({kind.column}) FROM {kind.table}")
        return row.fetchone()  # type: ignore[no-any-return]


def named(message: str, kind: Kind) -> bool:
    """Whether a refusal names the table, the column and a row."""
    return kind.table in message and kind.column in message and "row" in message


# --- the paths -------------------------------------------------------------------------------

Outcome = str
"""A cell's word: `exact`, `refused`, `named`, `healthy`, `replaced` (shown or sent with
U+FFFD for the bytes), `unnamed` (a failure that does not name the row), `unread` (the path
does not read that table); anything else is said as it was (a failing claim)."""

UNREAD = {("otlp", "run_leases"), ("commands", "run_leases")}
"""The paths that do not read a table at all."""


def refused_or(done: Any, kind: Kind, exact: Callable[[], Outcome | bool]) -> Outcome:
    """A command's outcome: `refused` when its last line is the error naming the row (a copy
    says what it did first), `unnamed` when the error does not; else what `exact()` says."""
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
        if "Traceback" in done.stderr or not last.startswith("harness-store: error: "):
            return f"failed otherwise ({done.returncode}): {done.stderr.strip()[:300]}"
        if done.returncode != 1:
            return f"failed with exit code {done.returncode}: {last}"
        return "refused" if named(last, kind) else "unnamed"
    said = exact()
    return said if isinstance(said, str) else "exact" if said else "changed"


def compared(value: Any, kind: Kind) -> Outcome | bool:
    """`exact`, or `replaced` for text whose bytes are not UTF-8 shown with U+FFFD."""
    if isinstance(kind.python, bytes) and isinstance(value, str) and "\ufffd" in value:
        return "replaced"
    if isinstance(kind.python, float) and math.isinf(kind.python):
        return isinstance(value, float) and value == kind.python
    return bool(value == kind.python and type(value) is type(kind.python))


def copy_into_sqlite(tmp: Path, source: Path, kind: Kind, pg_url: str | None) -> Outcome:
    target = tmp / "copy.sqlite3"
    done = run_in_process("copy", source, target)
    return refused_or(done, kind, lambda: cell_of(target, kind) == cell_of(source, kind))


def sync_into_sqlite(tmp: Path, source: Path, kind: Kind, pg_url: str | None) -> Outcome:
    target = tmp / "sync.sqlite3"
    NEW_STORE.place(str(target))  # a centre made already (see the module)
    done = run_in_process("sync", source, target)

    def exact() -> Outcome | bool:
        return held_in(str(target), done.stdout, source, kind) or (
            cell_of(target, kind) == cell_of(source, kind)
        )

    return refused_or(done, kind, exact)


def held_in(dest: str, said: str, source: Path, kind: Kind) -> Outcome | None:
    """`quarantined` when the sync into `dest` held the value's run there byte-exact and
    named it in its output (`said`); None when it held nothing."""
    held = quarantined(dest)
    if not held:
        return None
    (entry,) = held
    storage, raw = entry.rows()[kind.table][0][kind.column]
    kept = (storage, (raw or b"").hex().upper()) == cell_of(source, kind)
    named = f"quarantined run {entry.run}: {kind.table}.{kind.column}" in said
    return "quarantined" if kept and named else f"quarantined, kept {kept}, said {named}"


def into_postgresql(tmp: Path, source: Path, kind: Kind, pg_url: str | None) -> Outcome:
    assert pg_url is not None

    def exact() -> Outcome | bool:
        engine = create_engine(pg_url)
        try:
            with engine.connect() as conn:
                value = conn.execute(text(f"SELECT {kind.column} FROM {kind.table}")).scalar()
        finally:
            engine.dispose()
        return compared(value, kind)

    try:
        return refused_or(run_in_process("copy", source, pg_url), kind, exact)
    finally:  # the next value of the kind goes into an empty database again
        engine = create_engine(pg_url)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
        engine.dispose()


def sync_into_postgresql(tmp: Path, source: Path, kind: Kind, pg_url: str | None) -> Outcome:
    assert pg_url is not None
    NEW_STORE.place(pg_url)  # a centre made already (see the module)
    done = run_in_process("sync", source, pg_url)

    def exact() -> Outcome | bool:
        held = held_in(pg_url, done.stdout, source, kind)
        if held is not None:  # the run is kept byte-exact, and named in the command's output
            return held
        engine = create_engine(pg_url)
        try:
            with engine.connect() as conn:
                value = conn.execute(text(f"SELECT {kind.column} FROM {kind.table}")).scalar()
        finally:
            engine.dispose()
        return compared(value, kind)

    try:
        return refused_or(done, kind, exact)
    finally:  # the next value of the kind goes into an empty database again
        engine = create_engine(pg_url)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
        engine.dispose()


def archive(tmp: Path, source: Path, kind: Kind, pg_url: str | None) -> Outcome:
    before = cell_of(source, kind)
    with closing(sqlite3.connect(source)) as conn:  # a leased run is in use: lapse it
        conn.execute("UPDATE run_leases SET renewed_at = '2000-01-01T00:00:00.000Z'")
        conn.commit()
    target = tmp / "archive.sqlite3"
    args = ("prune", source, "--runs", "--before", "9999-01-01", "--archive-to", target, "--yes")
    return refused_or(run_in_process(*args), kind, lambda: cell_of(target, kind) == before)


def parquet(tmp: Path, source: Path, kind: Kind, pg_url: str | None) -> Outcome:
    directory = tmp / "dataset"

    def exact() -> Outcome | bool:
        data = read_dataset(directory, kind.table)
        said = compared(data[kind.column][0].as_py(), kind)
        if kind.column == "tool_call" and said is True:  # its calls as every reader reads them
            with Store.open(source, read_only=True) as store:
                (step,) = store.steps(1)
            calls = [(c.name, c.arguments) for c in step.tool_calls]
            return [
                (c["name"], c["arguments"]) for c in data["tool_calls"][0].as_py() or []
            ] == calls
        return said

    return refused_or(run_in_process("export", "parquet", source, directory), kind, exact)


def rfc_8259(value: Any) -> bool:
    """Whether an attribute that reads as JSON to Python's lenient reader is JSON as RFC 8259
    defines it (no NaN, no Infinity)."""
    if not isinstance(value, str):
        return True
    try:
        json.loads(value)
    except ValueError:
        return True  # no JSON at all: text
    try:
        JSON.decode(value)
    except ValueError:
        return False
    return True


def otlp(tmp: Path, source: Path, kind: Kind, pg_url: str | None) -> Outcome:
    sink = Sink.start()
    try:
        done = run_in_process("export", "otlp", source, "--endpoint", sink.url, "--include-content")
    finally:
        sink.stop()
    sent = [
        v
        for span in sink.spans.values()
        for attributes in (span, *span["events"])
        for k, v in attributes.items()
        if k != "events"
    ]

    def exact() -> Outcome | bool:
        if ("otlp", kind.table) in UNREAD:
            return "unread"
        if kind.column == "tool_call":  # as written, as no call (every reader's grammar)
            tools = [a for a in sink.spans.values() if a.get("gen_ai.tool.name") == "read_file"]
            return kind.python in sent and not tools and all(map(rfc_8259, sent))
        if any(isinstance(v, str) and "\ufffd" in v for v in sent):
            return "replaced"
        return kind.python in sent

    return refused_or(done, kind, exact)


def commands(tmp: Path, source: Path, kind: Kind, pg_url: str | None) -> Outcome:
    outcomes = set()
    for args in (("trace", source, "1"), ("runs", source), ("tree", source, "1")):
        done = run_in_process(*args)

        def exact(shown: str = done.stdout + done.stderr) -> Outcome | bool:
            if ("commands", kind.table) in UNREAD:
                return "unread"
            if isinstance(kind.python, bytes) and "\ufffd" in shown:
                # said, as the table's cell says: how many values were shown replaced
                return "replaced" if "held bytes that are not UTF-8" in shown else "unsaid"
            return True

        outcomes.add(refused_or(done, kind, exact))
    if outcomes == {"exact", "replaced"}:  # `trace` shows the text; the others do not
        return "replaced"
    return outcomes.pop() if len(outcomes) == 1 else f"the commands differ: {outcomes}"


def store_reads(tmp: Path, source: Path, kind: Kind, pg_url: str | None) -> Outcome:
    with Store.open(source, read_only=True) as store:
        try:
            if kind.table == "run_leases":
                store.run_lease(1)
                return "exact"
            (step,) = store.steps(1)
            store.runs()
            store.tree(1)
            store.spent_tokens(1)
        except Exception as exc:
            return "refused" if named(str(exc), kind) else "unnamed"
    said = compared(getattr(step, kind.column), kind)
    return said if isinstance(said, str) else "exact" if said else "changed"


def check(tmp: Path, source: Path, kind: Kind, pg_url: str | None) -> Outcome:
    done = run_in_process("check", source, "--json")
    if done.returncode == 0:
        return "healthy"
    said = json.dumps(json.loads(done.stdout))
    if done.returncode == 6 and kind.table in said and kind.column in said:
        return "named"
    return f"check said {done.returncode}: {said[:300]}"


PATHS: dict[str, Callable[[Path, Path, Kind, str | None], Outcome]] = {
    "`copy` into SQLite": copy_into_sqlite,
    "`sync` into SQLite": sync_into_sqlite,
    "`copy` into PostgreSQL": into_postgresql,
    "`sync` into PostgreSQL": sync_into_postgresql,
    "`prune --archive-to`": archive,
    "`export parquet`": parquet,
    "`export otlp`": otlp,
    "`runs`, `trace`, `tree`": commands,
    "the Store's reads": store_reads,
    "`check`": check,
}


def observe(tmp: Path, kind_name: str, path: str, pg_url: str | None) -> set[Outcome]:
    """What `path` does with each value of `kind_name`."""
    seen = set()
    for n, kind in enumerate(KINDS[kind_name]):
        work = tmp / f"v{n}"
        work.mkdir()
        source = work / "runs.sqlite3"
        foreign_store(source, kind)
        seen.add(PATHS[path](work, source, kind, pg_url))
    return seen


@pytest.mark.parametrize(("kind", "path", "cell"), claims())
def test_the_table_says_what_each_path_does(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str, path: str, cell: str
) -> None:
    pg_url = request.getfixturevalue("pg_url") if "PostgreSQL" in path else None
    assert observe(tmp_path, kind, path, pg_url) == {plain_cell(cell)}


def test_the_table_covers_every_kind_and_path() -> None:
    paths, rows = table_of_page()
    assert paths == list(PATHS) and list(rows) == list(KINDS)
