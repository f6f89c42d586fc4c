"""The archive a prune copies the runs it deletes into: refusing an archive that is the store
itself (or one of its side files) or holds another store's runs, reading each deleted row
exactly as it was (text that is not UTF-8 as its bytes), and receiving a batch's rows in the
archive's own transaction, committed before the batch's deletion is."""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cache
from operator import itemgetter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from sqlalchemy import (
    Table,
    bindparam,
    case,
    cast,
    delete,
    insert,
    select,
    type_coerce,
    update,
)
from sqlalchemy.sql.sqltypes import NullType, String

from ..dialects import backend_named
from ..dialects.read_only_files import JOURNAL_SUFFIX, SIDE_SUFFIXES, beside
from ..dialects.sqlite_queue import QUEUE_SUFFIX
from ..errors import ArchiveRefusedError, InvalidValueError
from ..file_modes import FileModes
from ..models.spend import RUN_SPEND_TABLES
from .release_tables import OlderStoreMixin
from .retention_rows import (
    CHUNK,
    RUN_TABLES,
    chunks,
    delete_statement,
    table,
)

SIDE_FILES = (*SIDE_SUFFIXES, JOURNAL_SUFFIX, QUEUE_SUFFIX)
"""The files beside a SQLite store that belong to it: an archive is never one of them."""


class PruneArchiveMixin(OlderStoreMixin):
    """The archive side of `prune_runs`: the archive's path and store, and its rows."""

    def _archive_path(self, archive: str | os.PathLike[str]) -> Path:
        """The archive's path, refused (`ArchiveRefusedError`) when it is this store or one of
        its side files, named directly or through a link."""
        text = os.fspath(archive)
        if not isinstance(text, str) or "://" in text or not text:
            raise InvalidValueError(f"an archive is a SQLite file path, not {archive!r}")
        path = Path(text).resolve()
        if path.is_dir():
            raise InvalidValueError(f"the archive {path} is a directory")
        mine = own_file(self.url)
        if mine is not None:
            for own in [mine, *(beside(mine, side) for side in SIDE_FILES)]:
                if own == path or (own.exists() and path.exists() and os.path.samefile(own, path)):
                    what = "the store pruned" if own == mine else f"the store's {own.name}"
                    raise ArchiveRefusedError(
                        f"the archive {text} is {what}: an archive must be another store file "
                        f"(nothing was deleted)"
                    )
        return path

    def _open_archive(self, path: Path) -> Any:
        """The archive store, a new one created as private as the store pruned."""
        from . import Store

        if not path.exists():
            FileModes.of(own_file(self.url)).create_file(path)
        return Store.open(path, backup=False)

    def _admit(self, source: Any, runs: Sequence[int]) -> None:
        """Refuse, before any batch, an archive holding other runs under these runs' ids."""
        r = table("runs")
        statement = select(*exact_columns(r, source.dialect.name))
        incoming = {
            "runs": [
                exact_row(row, r, source.dialect.name)
                for part in chunks(list(runs))
                for row in source.execute(statement.where(r.c.id.in_(part)))
            ]
        }
        with self._read() as conn:
            refuse_foreign(conn, incoming)

    def _receive(self, incoming: dict[str, list[dict[str, Any]]]) -> None:
        """Write `incoming` (every row of some runs, by table, as their source's deletion
        returned them) into this store, in one transaction committed here. A copy of these
        same runs already here (a prune that crashed after its archive committed and before
        its delete, run again) is replaced; a different run under one of their ids, or a row
        of another run under one of their rows' ids (another store's runs), is refused before
        anything is written."""
        names = [("runs", "id"), *RUN_TABLES]
        runs = sorted(int(row["id"]) for row in incoming["runs"])
        with self._write() as conn:
            refuse_foreign(conn, incoming)
            for name, key in reversed(names):
                for part in chunks(runs):
                    conn.execute(delete_statement(name, key), {"ids": part})
            for spend in RUN_SPEND_TABLES:
                for part in chunks(runs):
                    conn.execute(delete(spend).where(spend.c.run_id.in_(part)))
            for name, _ in names:
                t = table(name)
                rows = incoming.get(name, [])
                for i in range(0, len(rows), CHUNK):
                    conn.execute(insert(t), [plain_row(row) for row in rows[i : i + CHUNK]])
                for row in rows:
                    for column in row.get(RAW_TEXT, ()):
                        # Bound as bytes (a BLOB), made text again: the very bytes, as text.
                        keys = [c == row[c.name] for c in t.primary_key.columns]
                        conn.execute(
                            update(t).where(*keys).values({column: cast(t.c[column], String)})
                        )


def remove_store_file(path: Path) -> None:
    """Remove a SQLite store file made by this prune and the side files beside it."""
    for file in [path, *(beside(path, side) for side in SIDE_FILES)]:
        file.unlink(missing_ok=True)


RAW_TEXT = "raw text?"
"""The key under which an archived row lists its columns holding text that is not UTF-8 (as
its bytes); and the start of the label of each text column's flag (was it text): no column
of the models is named so."""


def exact_columns(t: Table, dialect: str) -> list[Any]:
    """`t`'s columns as an archive reads them to keep each value exactly: where the backend
    keeps any bytes as text (SQLite), each text column's text as its bytes, followed by
    whether it was text — so text that is not UTF-8 can be read at all (`exact_row` decodes
    the rest)."""
    return [c for c, _ in _exact_layout(t.name, dialect)]


@cache
def _exact_layout(name: str, dialect: str) -> tuple[tuple[Any, bool], ...]:
    """Each column `exact_columns` reads, and whether a flag (was it text) follows it."""
    backend = backend_named(dialect)
    layout: list[tuple[Any, bool]] = []
    for column in table(name).columns:
        faults = backend.text_faults(column) if isinstance(column.type, String) else None
        as_text = backend.stored_as(column, "text")
        if faults is None or as_text is None:
            layout.append((column, False))
            continue
        raw = type_coerce(case((as_text, faults[2]), else_=column), NullType())
        layout += [
            (raw.label(column.name), True),
            (as_text.label(f"{RAW_TEXT} {column.name}"), False),
        ]
    return tuple(layout)


@cache
def archiving_delete(name: str, key: str, dialect: str) -> Any:
    """`DELETE FROM name WHERE key IN (:ids)` returning every column of each row it deleted
    as `exact_columns` reads them (what an archive receives), built once."""
    t = table(name)
    statement = delete(t).where(t.c[key].in_(bindparam("ids", expanding=True)))
    return statement.returning(*exact_columns(t, dialect))


@cache
def _exact_plan(name: str, dialect: str) -> tuple[tuple[str, ...], Any, list[tuple[str, int, int]]]:
    """How `exact_row` reads a row of `name`: the column names, the getter of their values,
    and each text column read as bytes with the positions of its value and its flag."""
    names: list[str] = []
    positions: list[int] = []
    texts: list[tuple[str, int, int]] = []
    layout = _exact_layout(name, dialect)
    for at, (column, flagged) in enumerate(layout):
        if at and layout[at - 1][1]:
            continue  # a flag
        names.append(column.name)
        positions.append(at)
        if flagged:
            texts.append((column.name, at, at + 1))
    return tuple(names), itemgetter(*positions), texts


def exact_row(row: Any, t: Table, dialect: str) -> dict[str, Any]:
    """A row read through `exact_columns` as the values it holds: text read as bytes decoded,
    or, not UTF-8, kept as its bytes and its column listed under `RAW_TEXT`."""
    names, values_of, texts = _exact_plan(t.name, dialect)
    values = dict(zip(names, values_of(row), strict=True))
    raw: list[str] = []
    for name, at, flag in texts:
        value = row[at]
        if row[flag] and isinstance(value, bytes | memoryview):
            try:
                values[name] = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                values[name] = bytes(value)
                raw.append(name)
    if raw:
        values[RAW_TEXT] = raw
    return values


def plain_row(row: dict[str, Any]) -> dict[str, Any]:
    """An archived row's values, without its `RAW_TEXT` list."""
    return {k: v for k, v in row.items() if k != RAW_TEXT}


def own_file(url: Any) -> Path | None:
    """The resolved path of a SQLite store's file, None for another backend or in memory."""
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    name = str(url.database)
    if name.startswith("file:"):
        name = unquote(urlsplit(name).path)
    return Path(name).resolve()


def plain(value: Any) -> Any:
    """A column value as both backends give it back (bytes for a blob, ints for booleans)."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, bool):
        return int(value)
    return value


def refuse_foreign(conn: Any, incoming: dict[str, list[dict[str, Any]]]) -> None:
    """`ArchiveRefusedError` when the archive (`conn`) holds a run under one of the incoming
    runs' ids that is not the same run, or a row of another run under an incoming row's id."""
    runs = {int(row["id"]): row for row in incoming["runs"]}
    r = table("runs")
    statement = select(*exact_columns(r, conn.dialect.name))
    for part in chunks(sorted(runs)):
        for row in conn.execute(statement.where(r.c.id.in_(part))):
            there = {k: plain(v) for k, v in exact_row(row, r, conn.dialect.name).items()}
            here = {k: plain(v) for k, v in runs[int(row.id)].items()}
            if there != here:
                raise ArchiveRefusedError(
                    f"the archive holds another run {row.id} (another store's runs): an archive "
                    f"takes the runs of one store only (nothing was deleted)"
                )
    for name, key in RUN_TABLES:
        t = table(name)
        primary = list(t.primary_key.columns)
        if len(primary) != 1 or primary[0].name == key or not incoming.get(name):
            continue
        pk = primary[0]
        ids = [row[pk.name] for row in incoming[name]]
        for part in chunks(ids):
            statement = select(pk, t.c[key]).where(pk.in_(part))
            clash = next((c for c in conn.execute(statement) if int(c[1]) not in runs), None)
            if clash is not None:
                raise ArchiveRefusedError(
                    f"the archive holds {name} row {clash[0]} of run {clash[1]}, not of the "
                    f"runs pruned (another store's runs): an archive takes the runs of one "
                    f"store only (nothing was deleted)"
                )
