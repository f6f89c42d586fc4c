"""The value checks of `Store.check` (see `check`): every value io-harness could not read
back. SQLite keeps whatever a writer hands it: text, a BLOB, Infinity or a fraction in an
INTEGER column, a BLOB or a number in a TEXT one, bytes that are not UTF-8, a NUL; and a time
stamp may be no time.

One aggregate pass per table counts the bad values of every column; only a column with some
is read again, for its first `ROWS_SHOWN` keys and an example. Text with a byte outside ASCII
is counted in that pass too, and only those rows are read again (streamed, never kept) to
check that their bytes are UTF-8. The other row checks (`check_rows`) read only integer
values (`check_rows.integers`), so a mistyped row is named here once instead of failing them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any

from sqlalchemy import Connection, Integer, and_, case, func, not_, or_, select

from ..dialects import Backend
from ..formats import JSON, step_tool_calls
from ..records.health import ROWS_SHOWN, Finding, FindingKind
from .check_rows import model_table
from .unreadable import shown

K = FindingKind

TIME = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z?$"
"""A time stamp as io-harness writes them: `%Y-%m-%dT%H:%M:%fZ` (SQLite's clock) or
`YYYY-MM-DD HH:MM:SS` (`datetime('now')`), which its SQL's date functions read."""


def text_columns(table: Any) -> list[Any]:
    """The text columns (every column of the models that is not an integer one)."""
    return [c for c in table.columns if not isinstance(c.type, Integer)]


def time_columns(table: Any) -> list[Any]:
    """The columns that hold a time stamp: `at` and every `…_at`."""
    return [c for c in table.columns if c.name == "at" or c.name.endswith("_at")]


def integer_columns(table: Any) -> list[Any]:
    """The integer columns but a rowid key (which SQLite keeps an integer)."""
    keys = list(table.primary_key.columns)
    rowid = keys[0] if len(keys) == 1 and isinstance(keys[0].type, Integer) else None
    return [c for c in table.columns if isinstance(c.type, Integer) and c is not rowid]


def readable_lease_rows(backend: Backend, leases: Any) -> Any:
    """Where a lease's `renewed_at` is a time stamp and its `ttl_secs` and `generation` are
    integers (the lease check reads only those; this check names the others)."""
    integers = [backend.stored_as(leases.c[name], "integer") for name in ("ttl_secs", "generation")]
    return and_(
        leases.c.renewed_at.is_not(None),
        leases.c.ttl_secs.is_not(None),
        leases.c.generation.is_not(None),
        not_(_not_a_time(backend, leases.c.renewed_at)),
        *(i for i in integers if i is not None),
    )


def _not_a_time(backend: Backend, column: Any) -> Any:
    """Where `column` holds something but no time stamp (a number, a blob, other text). Text
    with a byte outside ASCII or a NUL is no time either, and is never handed to the pattern
    (SQLite's is a Python function, which cannot take bytes that are not UTF-8)."""
    as_text = backend.stored_as(column, "text")
    faults = backend.text_faults(column)
    if faults is not None:
        as_text = and_(as_text, not_(faults[0]), not_(faults[1]))
    matches = column.regexp_match(TIME)
    readable = matches if as_text is None else case((as_text, matches), else_=False)
    return and_(column.is_not(None), not_(func.coalesce(readable, False)))


def _shown(value: object) -> str:
    """An example value, quoted: text read as bytes (so any bytes can be shown) is shown as
    text when it is UTF-8."""
    if isinstance(value, bytes):
        with suppress(UnicodeDecodeError):
            value = value.decode("utf-8")
    return shown(value)


def _example(backend: Backend, column: Any) -> Any:
    """`column` as an example is read: text as its bytes where the backend keeps any bytes as
    text (so text that is not UTF-8 can be read at all)."""
    faults = backend.text_faults(column)
    as_text = backend.stored_as(column, "text")
    if faults is None or as_text is None:
        return column
    return case((as_text, faults[2]), else_=column)


def value_findings(
    conn: Connection, backend: Backend, tables: Mapping[str, frozenset[str]]
) -> list[Finding]:
    """Values of another type than their column's, time stamps that are no time, and text
    that is not UTF-8 or holds a NUL, in every table of the models the store has."""
    findings: list[Finding] = []
    for name in sorted(tables):
        try:
            table = model_table(name)
        except KeyError:
            continue  # an unknown table: the schema check names it
        present = tables[name]
        keys = [k for k in table.primary_key.columns if k.name in present]
        if not keys:
            continue
        checks: list[tuple[Any, str, Any]] = []
        for column in integer_columns(table):
            wrong = backend.stored_as(column, "integer")
            if column.name in present and wrong is not None:
                checks.append((column, "integer", not_(wrong)))
        times = time_columns(table)
        for column in times:
            if column.name in present:
                checks.append((column, "time", _not_a_time(backend, column)))
        texts = [c for c in text_columns(table) if c.name in present]
        for column in texts:
            as_text = backend.stored_as(column, "text")
            if as_text is not None and not any(column is t for t in times):
                checks.append((column, "text", not_(as_text)))
        if checks:
            counts = conn.execute(
                select(
                    *(func.coalesce(func.sum(case((bad, 1), else_=0)), 0) for _, _, bad in checks)
                )
            ).one()
            for (column, kind, bad), count in zip(checks, counts, strict=True):
                if int(count):
                    findings.append(
                        _finding(conn, backend, table, keys, column, kind, bad, int(count))
                    )
        findings += _text_findings(conn, backend, table, keys, texts)
        for column in (table.c[c] for c in PARSED.get(name, ()) if c in present):
            found = _json_finding(conn, backend, table, keys, column, _document)
            findings += [found] if found is not None else []
        for column in (table.c[c] for c in CALLS.get(name, ()) if c in present):
            found = _json_finding(conn, backend, table, keys, column, _calls)
            findings += [found] if found is not None else []
    return findings


PARSED: dict[str, tuple[str, ...]] = {
    "run_policies": ("policy",),
    "step_turns": ("calls",),
    "run_events": ("json",),
}
"""The JSON documents io-harness parses and fails on when they are not JSON (a resume's
policy and assistant turns, the event stream); its other JSON columns read as empty then."""


CALLS: dict[str, tuple[str, ...]] = {"steps": ("tool_call",)}
"""The tool calls of a step, read by the one grammar (`formats.step_tool_calls`) by every
reader: io-harness's, `StepRecord.tool_calls` and both exports."""

_LENIENT = json.JSONDecoder()
"""Python's own JSON reader, which takes NaN and Infinity."""


def _document(text: str, strict: bool) -> bool:
    """Whether `text` reads as one JSON document (`strict`: as RFC 8259 defines JSON)."""
    try:
        (JSON if strict else _LENIENT).decode(text)
    except ValueError:
        return False
    return True


def _calls(text: str, strict: bool) -> bool:
    """Whether `text` reads as a step's tool calls (`strict`: their arguments RFC 8259)."""
    return step_tool_calls(text, JSON if strict else _LENIENT) is not None


def _json_finding(
    conn: Connection,
    backend: Backend,
    table: Any,
    keys: list[Any],
    column: Any,
    reads: Callable[[str, bool], bool],
) -> Finding | None:
    """The values of `column` that hold NaN or Infinity as a JSON value: the rows whose text
    holds either word are read (as bytes where the backend keeps any), one at a time, and
    those that `reads` only leniently (Python's reader), not as RFC 8259 says, are named."""
    faults = backend.text_faults(column)
    value = column if faults is None else faults[2]
    words = or_(column.like("%NaN%"), column.like("%Infinity%"))
    bad = _Bad()
    for row in conn.execute(select(*keys, value).where(words).order_by(*keys)):
        raw = row[-1]
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
        except ValueError:
            continue  # not UTF-8: named elsewhere
        if reads(text, False) and not reads(text, True):
            bad.add(tuple(row[: len(keys)]), text.encode())
    if not bad.count:
        return None
    key, rows, where = _named(keys, bad)
    return Finding(
        K.NOT_JSON,
        table.name,
        f"{table.name}.{column.name} holds {bad.count} "
        f"{'documents' if reads is _document else 'tool calls'} with NaN or Infinity, which "
        f"JSON (RFC 8259) has not (e.g. {_shown(bad.example)})",
        (
            "io-harness's read of these rows fails (its JSON reader refuses NaN and "
            "Infinity): a resume of the run, or a read of its event stream, stops with an error"
            if reads is _document
            else "every reader of a step's tool calls (io-harness's JSON reader, "
            "`StepRecord.tool_calls`, both exports) reads no call there"
        ),
        key=key,
        rows=rows,
        count=bad.count,
        command=f"UPDATE {table.name} SET {column.name} = '…' WHERE {where}",
    )


class _Bad:
    """The rows of one column found with one fault: how many, the first keys, an example."""

    def __init__(self) -> None:
        self.count = 0
        self.found: list[tuple[Any, ...]] = []
        self.example = b""

    def add(self, key: tuple[Any, ...], value: bytes) -> None:
        self.count += 1
        if len(self.found) < ROWS_SHOWN:
            self.found.append(key)
            self.example = self.example or value


def _text_findings(
    conn: Connection, backend: Backend, table: Any, keys: list[Any], texts: list[Any]
) -> list[Finding]:
    """Text whose bytes are not UTF-8 or that holds a NUL, on a backend that keeps any bytes
    as text (SQLite): each row's text read as bytes, one row at a time (a search for a byte
    outside ASCII and for a NUL is many times cheaper in Python than SQLite's `GLOB`), only
    the first `ROWS_SHOWN` keys and one example kept per column."""
    readers = []
    for column in texts:
        faults = backend.text_faults(column)
        as_text = backend.stored_as(column, "text")
        if faults is not None and as_text is not None:
            readers.append((column, case((as_text, faults[2]), else_=None)))
    if not readers:
        return []
    n = len(keys)
    nul = [_Bad() for _ in readers]
    wrong = [_Bad() for _ in readers]
    statement = select(*keys, *(raw for _, raw in readers))
    for row in conn.execute(statement.order_by(*keys)):
        for i, value in enumerate(row[n:]):
            if value is None:
                continue
            if b"\x00" in value:
                nul[i].add(tuple(row[:n]), value)
            if not value.isascii():
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError:
                    wrong[i].add(tuple(row[:n]), value)
    findings = []
    for (column, _), bad_text, with_nul in zip(readers, wrong, nul, strict=True):
        if bad_text.count:
            findings.append(_utf8_finding(table, keys, column, bad_text))
        if with_nul.count:
            findings.append(_nul_finding(table, keys, column, with_nul))
    return findings


def _named(keys: list[Any], bad: _Bad) -> tuple[str, tuple[int | str, ...], str]:
    """A finding's key, rows and WHERE for `bad`'s rows."""
    rows = tuple(r[0] if len(keys) == 1 else "/".join(str(v) for v in r) for r in bad.found)
    return "/".join(k.name for k in keys), rows, _where(keys, bad.found, bad.count)


def _utf8_finding(table: Any, keys: list[Any], column: Any, bad: _Bad) -> Finding:
    key, rows, where = _named(keys, bad)
    return Finding(
        K.NOT_UTF8,
        table.name,
        f"{table.name}.{column.name} holds {bad.count} texts whose bytes are not UTF-8 "
        f"(e.g. {shown(bad.example)})",
        "io-harness's reads of these rows fail (its text is UTF-8); the Store's reads and "
        "`copy` and `sync` to PostgreSQL refuse them",
        key=key,
        rows=rows,
        count=bad.count,
        command=f"UPDATE {table.name} SET {column.name} = '…' WHERE {where}",
    )


def _nul_finding(table: Any, keys: list[Any], column: Any, bad: _Bad) -> Finding:
    key, rows, where = _named(keys, bad)
    return Finding(
        K.NUL_IN_TEXT,
        table.name,
        f"{table.name}.{column.name} holds {bad.count} texts with a NUL character "
        f"(e.g. {_shown(bad.example)})",
        "io-harness reads them, but SQLite's text functions stop at the NUL, the Store "
        "refuses NUL in text, and PostgreSQL's text cannot hold it: `copy` and `sync` to "
        "PostgreSQL refuse these rows",
        key=key,
        rows=rows,
        count=bad.count,
        command=f"UPDATE {table.name} SET {column.name} = replace({column.name}, char(0), '') "
        f"WHERE {where}",
    )


def _where(keys: list[Any], found: list[Any], count: int) -> str:
    """The WHERE naming the rows whose key values are `found` (the first three, where the key
    has several columns)."""
    if len(keys) == 1:
        more = ", …" if count > len(found) else ""
        return f"{keys[0].name} IN ({', '.join(str(r[0]) for r in found)}{more})"
    return " OR ".join(
        "(" + " AND ".join(f"{k.name} = {v!r}" for k, v in zip(keys, row, strict=False)) + ")"
        for row in found[:3]
    )


def _finding(
    conn: Connection,
    backend: Backend,
    table: Any,
    keys: list[Any],
    column: Any,
    kind: str,
    bad: Any,
    count: int,
) -> Finding:
    example_of = _example(backend, column)
    found = conn.execute(
        select(*keys, example_of).where(bad).order_by(*keys).limit(ROWS_SHOWN)
    ).all()
    rows = tuple(row[0] if len(keys) == 1 else "/".join(str(v) for v in row[:-1]) for row in found)
    example = _shown(found[0][-1]) if found else "?"
    key = "/".join(k.name for k in keys)
    where = _where(keys, [tuple(row[:-1]) for row in found], count)
    item = f"{table.name}.{column.name}"
    if kind == "text":
        return Finding(
            K.WRONG_TYPE,
            table.name,
            f"{item} holds {count} values that are not text (e.g. {example})",
            "io-harness's reads of these rows fail (its row types take text there); `copy` "
            "and `sync` to PostgreSQL refuse them",
            key=key,
            rows=rows,
            count=count,
            command=f"UPDATE {table.name} SET {column.name} = CAST({column.name} AS TEXT) "
            f"WHERE {where}",
        )
    if kind == "integer":
        return Finding(
            K.WRONG_TYPE,
            table.name,
            f"{item} holds {count} values that are not integers (e.g. {example})",
            "io-harness's reads of these rows fail (its row types take an integer there); "
            "SQL sums and comparisons read the text as 0 or above every number",
            key=key,
            rows=rows,
            count=count,
            command=f"DELETE FROM {table.name} WHERE {where}",
        )
    return Finding(
        K.BAD_TIME,
        table.name,
        f"{item} holds {count} values that are not time stamps (e.g. {example})",
        "io-harness's SQL reads it as a time (durations, a lease's expiry, cut-offs and "
        "ordering by time): on these rows it computes NULL or sorts them out of place",
        key=key,
        rows=rows,
        count=count,
        command=f"UPDATE {table.name} SET {column.name} = 'YYYY-MM-DDTHH:MM:SS.SSSZ' WHERE {where}",
    )
