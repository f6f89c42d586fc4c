"""Whether the target can hold a source's values exactly: the one check `copy` and `sync`
make of the rows they move, before any of them is written.

A SQLite source keeps whatever its writer handed it: a NUL character or a BLOB in a TEXT
column, text or a REAL (Infinity) in an INTEGER one, bytes that are not UTF-8 in a text. A
target whose columns hold any value (SQLite) takes each of them as it is; one whose columns
hold only their declared type (PostgreSQL) would refuse them with a bare driver error, or,
for a BLOB in text, keep its hex spelling instead of the bytes. Such a value is found here by
one statement per table that SQLite answers without handing a row to Python, and said with
its table, row key and column. Bytes that are not UTF-8 cannot be read as text at all, on any
target: a read that fails is followed by a look for them (`undecodable`), which names the
row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Integer,
    LargeBinary,
    String,
    Table,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal,
    not_,
    or_,
    select,
)

from ..dialects import Backend, backend_named

SHOWN = 40
"""The most characters of a value a refusal quotes."""


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else f"{text[: SHOWN - 1]}…"


def _row_name(table: Table, keys: Sequence[Any]) -> str:
    names = [c.name for c in table.primary_key.columns]
    return ", ".join(f"{k}={v}" for k, v in zip(names, keys, strict=True))


Say = Callable[[str, bytes], str | None]
"""What is wrong with a value, from its storage class and its bytes (None: nothing)."""


def _checks(
    source: Backend, target: Backend, columns: Iterable[Column[Any]], links: Iterable[str]
) -> list[tuple[Column[Any], ColumnElement[bool], Say]]:
    """Per column to check, the condition true where its value cannot go to `target` as it
    is, and what to say of such a value; none for a source whose columns hold only their
    declared type."""
    links = set(links)
    name = target.name
    checks: list[tuple[Column[Any], ColumnElement[bool], Say]] = []
    for column in columns:
        is_integer = source.stored_as(column, "integer")
        is_blob = source.stored_as(column, "blob")
        if is_integer is None or is_blob is None:
            continue  # a source whose columns hold only their declared type
        holds_any = target.stored_as(column, "text") is not None
        if isinstance(column.type, Integer) and (not holds_any or column.name in links):
            checks.append((column, not_(is_integer), _not_an_integer(name, holds_any)))
        elif isinstance(column.type, String) and not holds_any:
            nul = func.instr(cast(column, LargeBinary), literal(b"\x00", LargeBinary)) > 0
            checks.append((column, and_(column.is_not(None), or_(is_blob, nul)), _not_text(name)))
    return checks


def _not_an_integer(target: str, holds_any: bool) -> Say:
    def say(kind: str, raw: bytes) -> str:
        shown = _shown(raw if kind == "blob" else raw.decode("utf-8", "replace"))
        if holds_any:  # a link: the id of a row the sync remaps
            return (
                f"holds the {kind} value {shown} where the id of a row belongs, which a sync "
                "cannot link"
            )
        return (
            f"holds the {kind} value {shown} where an integer belongs, which {target} cannot hold"
        )

    return say


def _not_text(target: str) -> Say:
    def say(kind: str, raw: bytes) -> str | None:
        if kind == "blob":
            return (
                f"holds a BLOB ({_shown(raw)}) where text belongs, which {target} text would "
                "keep as its hex spelling, not as the bytes"
            )
        if b"\x00" in raw:
            return f"holds a NUL character (\\x00), which {target} text cannot store"
        return None

    return say


Check = tuple[
    str, tuple[str, ...], dict[str, Any], list[tuple[Column[Any], ColumnElement[bool], Say]]
]
"""A check's SQL, the names of its parameters in order with their fixed values, and what
each of its columns is checked for."""

CHECKS: dict[tuple[str, tuple[str, ...], str, str, frozenset[str], bool], Check | None] = {}
"""Each check's SQL, built and compiled once per table, columns, backends and links: every
source (each its own engine, whose statement cache would start empty) and every pass of a
follower checks the same tables."""


def _check(
    src: Connection,
    table: Table,
    columns: Sequence[Column[Any]],
    target: Backend,
    links: Iterable[str],
    above: bool,
) -> Check | None:
    links = frozenset(links)
    key = (table.name, tuple(c.name for c in columns), src.dialect.name, target.name, links, above)
    if key in CHECKS:
        return CHECKS[key]
    checks = _checks(backend_named(src.dialect.name), target, columns, links)
    keys = list(table.primary_key.columns)
    found: Check | None = None
    if checks and keys:
        bad = or_(*(condition for _, condition, _ in checks))
        where = and_(table.c.id > bindparam("above", 0), bad) if above else bad
        statement = (
            select(
                *keys,
                *(func.typeof(column) for column, _, _ in checks),
                *(cast(column, LargeBinary) for column, _, _ in checks),
            )
            .where(where)
            .order_by(*keys)
            .limit(1)
        )
        compiled = statement.compile(
            dialect=src.dialect, compile_kwargs={"render_postcompile": True}
        )
        names = tuple(compiled.positiontup or ())
        found = (str(compiled), names, dict(compiled.params), checks)
    CHECKS[key] = found
    return found


def refusal(
    src: Connection,
    table: Table,
    columns: Sequence[Column[Any]],
    target: Backend,
    above: int | None = None,
    links: Iterable[str] = (),
) -> str | None:
    """The first value among `columns` of the rows of `table` (those whose id is `above`
    the given one, when given) in the source `src` that `target` cannot hold exactly (or, in
    a `links` column, that is no id), said for a person with its table, row key and column;
    None when every value can go."""
    check = _check(src, table, columns, target, links, above is not None)
    if check is None:
        return None
    sql, names, fixed, checks = check
    params = {**fixed, "above": above}
    row = src.exec_driver_sql(sql, tuple(params[name] for name in names)).first()
    if row is None:
        return None
    k, n = len(table.primary_key.columns), len(checks)
    kinds, values = row[k : k + n], row[k + n :]
    for (column, _, say), kind, value in zip(checks, kinds, values, strict=True):
        said = say(str(kind), bytes(value)) if value is not None else None
        if said is not None and (kind != "integer" or not isinstance(column.type, Integer)):
            where = f"{table.name}.{column.name} of the row {_row_name(table, row[:k])}"
            return f"{where} {said}"
    return None  # pragma: no cover - the row matched one of the checks


def undecodable(
    src: Connection,
    table: Table,
    columns: Sequence[Column[Any]],
    where: ColumnElement[bool] | None = None,
) -> str | None:
    """The first text among `columns` of the rows `where` selects whose bytes are not UTF-8
    (which no read of it as text can return), said with its table, row key and column; None.
    Looked for (`Backend.texts_not_utf8`) only after a read failed."""
    if not _keeps_any_bytes(src, columns):
        return None
    backend = backend_named(src.dialect.name)
    for key, column, raw, start in backend.texts_not_utf8(src, table, columns, where=where):
        return (
            f"{table.name}.{column.name} of the row {_row_name(table, key)} {_not_utf8(raw, start)}"
        )
    return None


def _keeps_any_bytes(src: Connection, columns: Sequence[Column[Any]]) -> bool:
    """Whether the source's text columns keep any bytes (SQLite), so may hold a text whose
    bytes are not UTF-8."""
    source = backend_named(src.dialect.name)
    texts = [c for c in columns if isinstance(c.type, String)]
    return bool(texts) and all(source.stored_as(c, "text") is not None for c in texts)


def _not_utf8(raw: bytes, start: int) -> str:
    return (
        f"holds text whose bytes are not UTF-8 ({_shown(raw)}, at byte {start}), which no "
        "reader can take as text"
    )


Refusal = tuple[int | None, str, str, str]
"""A value a target cannot hold: the run of its row (None when the row names none, or names
it with no integer), its row key, its column, and what is wrong, said for a person."""


Found = tuple[Any, list[tuple[Column[Any], ColumnElement[bool], Say]]]
"""A statement of `refusals` and what each of its columns is checked for."""

FOUND: dict[tuple[Any, ...], Found | None] = {}
"""Each statement `refusals` runs, with what its columns are checked for, built once per
table, columns, backends, links and the filters it takes (their values bound): a sync that
holds runs back looks at the same tables every pass."""


def _found(
    src: Connection,
    table: Table,
    columns: Sequence[Column[Any]],
    target: Backend,
    run_column: str,
    links: Iterable[str],
    above: bool,
    runs: bool,
) -> Found | None:
    """`refusals`' statement and checks (None: nothing to check), from `FOUND`."""
    key = (
        table.name,
        tuple(c.name for c in columns),
        src.dialect.name,
        target.name,
        frozenset(links),
        run_column,
        above,
        runs,
    )
    if key in FOUND:
        return FOUND[key]
    source = backend_named(src.dialect.name)
    checks = _checks(source, target, columns, links)
    keys = list(table.primary_key.columns)
    if not checks or not keys:
        FOUND[key] = None
        return None
    run = table.c[run_column]
    where = or_(*(condition for _, condition, _ in checks))
    if above:
        where = and_(table.c.id > bindparam("above"), where)
    if runs:
        where = and_(run.in_(bindparam("runs", expanding=True)), where)
    integer = source.stored_as(run, "integer")
    statement = (
        select(
            case((integer, run), else_=None) if integer is not None else run,
            *keys,
            *(func.typeof(column) for column, _, _ in checks),
            *(cast(column, LargeBinary) for column, _, _ in checks),
        )
        .where(where)
        .order_by(*keys)
    )
    found: Found = (statement, checks)
    FOUND[key] = found
    return found


def refusals(
    src: Connection,
    table: Table,
    columns: Sequence[Column[Any]],
    target: Backend,
    run_column: str,
    *,
    above: int | None = None,
    runs: Sequence[int] | None = None,
    links: Iterable[str] = (),
) -> list[Refusal]:
    """Every value `refusal` would refuse among `columns` of the rows of `table` (above the
    id `above`, of the runs `runs`, when given), one per row (its first), each with the run
    its `run_column` names: what a sync holds back, run by run (`sync.quarantine`)."""
    built = _found(
        src, table, columns, target, run_column, links, above is not None, runs is not None
    )
    if built is None:
        return []
    statement, checks = built
    params: dict[str, Any] = {}
    if above is not None:
        params["above"] = above
    if runs is not None:
        params["runs"] = list(runs)
    found: list[Refusal] = []
    k, n = len(table.primary_key.columns), len(checks)
    for row in src.execute(statement, params):
        kinds, values = row[1 + k : 1 + k + n], row[1 + k + n :]
        for (column, _, say), kind, value in zip(checks, kinds, values, strict=True):
            said = say(str(kind), bytes(value)) if value is not None else None
            if said is not None and (kind != "integer" or not isinstance(column.type, Integer)):
                owner = None if row[0] is None else int(row[0])
                found.append((owner, _row_name(table, row[1 : 1 + k]), column.name, said))
                break
    return found


def undecodables(
    src: Connection,
    table: Table,
    columns: Sequence[Column[Any]],
    run_column: str | None,
    *,
    runs: Sequence[int] | None = None,
) -> list[Refusal]:
    """Every text among `columns` of the rows of `table` (of the runs `runs`, when given)
    whose bytes are not UTF-8, one per row (its first), each with the run its `run_column`
    names (None: the table's rows are no run's): what a sync holds back after a read failed
    on one (`sync.quarantine`)."""
    if not _keeps_any_bytes(src, columns):
        return []
    also: list[ColumnElement[Any]] = []
    where = None
    if run_column is not None:
        run = table.c[run_column]
        integer = backend_named(src.dialect.name).stored_as(run, "integer")
        also.append(case((integer, run), else_=None) if integer is not None else run)
        if runs is not None:
            where = run.in_(list(runs))
    found: list[Refusal] = []
    seen: set[tuple[Any, ...]] = set()
    found_texts = backend_named(src.dialect.name).texts_not_utf8
    for head, column, raw, start in found_texts(src, table, columns, where=where, also=also):
        key = head[len(also) :]
        if key in seen:
            continue
        seen.add(key)
        owner = None if not also or head[0] is None else int(head[0])
        found.append((owner, _row_name(table, key), column.name, _not_utf8(raw, start)))
    return found
