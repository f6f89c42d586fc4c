"""Reading source rows and turning them into central ones: the columns both sides have, the
row hash, and link remapping."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from sqlalchemy import Column, ColumnElement, Table, literal_column, select
from sqlalchemy.sql import Select

from ..formats import is_int
from ..models import Base
from .rules import Rule

ROWID = "_hs_rowid"
"""The label under which a `rowid`-keyed table's SQLite rowid is read."""


def model_table(rule: Rule) -> Table:
    """The model's Core table of a rule."""
    return Base.metadata.tables[rule.table]


def source_columns(rule: Rule, have: Mapping[str, frozenset[str]]) -> list[Column[Any]]:
    """The model's columns the source has (an older release's store lacks later ones)."""
    return source_columns_of(model_table(rule), have)


def source_columns_of(table: Table, have: Mapping[str, frozenset[str]]) -> list[Column[Any]]:
    """The columns of `table` the source has."""
    return [c for c in table.columns if c.name in have.get(table.name, ())]


EVENT_RUN_FIELDS = ("run_id", "child_run_id")
"""Fields of a stored event's JSON that name a run (remapped as the row's columns are)."""


def event_json_for(raw: Any, runs: Mapping[int, int]) -> Any:
    """A stored event's JSON with the runs it names given their central ids (the Store reads
    an event from its JSON, not from the row's columns); JSON it cannot read is kept as is."""
    if not isinstance(raw, str) or "run_id" not in raw:
        return raw
    try:
        document = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(document, dict):
        return raw
    changed = False
    for name in EVENT_RUN_FIELDS:
        value = document.get(name)
        if is_int(value) and value in runs:
            document[name] = runs[value]
            changed = True
    if not changed:
        return raw
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def source_select(rule: Rule, columns: Sequence[Column[Any]]) -> Select[Any]:
    """A SELECT of the columns, keyed as the rule tracks rows (the rowid added when it is the
    key), in key order."""
    table = model_table(rule)
    if rule.key == "rowid":
        rowid: ColumnElement[int] = literal_column("rowid")
        return select(rowid.label(ROWID), *columns).order_by(rowid)
    return select(*columns).order_by(*table.primary_key.columns)


def digest(values: Sequence[Any]) -> int:
    """A 64-bit hash of a row's values, or of a list of rows (signed, to fit a BIGINT)."""
    raw = repr(values if isinstance(values, list) else tuple(values)).encode(
        "utf-8", "surrogatepass"
    )
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big", signed=True)


def digest_rows(rows: Iterable[Sequence[Any]]) -> int:
    """`digest` of a list of rows, hashed as they come: no text of the whole list is made
    (a state table's rows, every sync)."""
    hasher = RowsDigest()
    hasher.add(rows)
    return hasher.value()


class RowsDigest:
    """`digest_rows` of rows given a batch at a time (a table streamed, never held whole)."""

    def __init__(self) -> None:
        self.hasher = hashlib.blake2b(digest_size=8)
        self.hasher.update(b"[")
        self.first = True

    def add(self, rows: Iterable[Sequence[Any]]) -> None:
        for row in rows:
            text = repr(row if isinstance(row, tuple) else tuple(row))
            self.hasher.update(
                (text if self.first else ", " + text).encode("utf-8", "surrogatepass")
            )
            self.first = False

    def add_each(self, rows: Sequence[Sequence[Any]]) -> list[int]:
        """`add` the rows, and give each one's `digest`, every row's text made once."""
        digests: list[int] = []
        encode, blake2b, from_bytes = str.encode, hashlib.blake2b, int.from_bytes
        for row in rows:
            raw = encode(
                repr(row if isinstance(row, tuple) else tuple(row)), "utf-8", "surrogatepass"
            )
            self.hasher.update(raw if self.first else b", " + raw)
            self.first = False
            digests.append(from_bytes(blake2b(raw, digest_size=8).digest(), "big", signed=True))
        return digests

    def value(self) -> int:
        hasher = self.hasher.copy()
        hasher.update(b"]")
        return int.from_bytes(hasher.digest(), "big", signed=True)


def digest_each(rows: Iterable[Sequence[Any]]) -> list[int]:
    """`digest` of each of `rows` (a batch's goals), without a call a row."""
    encode, blake2b, from_bytes = str.encode, hashlib.blake2b, int.from_bytes
    return [
        from_bytes(
            blake2b(
                encode(
                    repr(row if isinstance(row, tuple) else tuple(row)), "utf-8", "surrogatepass"
                ),
                digest_size=8,
            ).digest(),
            "big",
            signed=True,
        )
        for row in rows
    ]


@dataclass
class Remapped:
    """Rows as written centrally (`remap`): their id dropped, every link remapped, held a
    column at a time."""

    names: list[str]
    """The columns written, in the order read."""
    columns: list[list[Any]]
    """Each column's values, a row's at its position in the rows given."""
    later: dict[int, list[tuple[str, int]]]
    """By a row's position: its nullable links to rows not sent yet, as `(column, source
    id)`, written NULL and set once those rows are there."""
    orphans: set[int]
    """The positions of rows whose NOT NULL link names a row the origin has not sent."""


def remap(
    rule: Rule,
    names: Sequence[str],
    rows: Sequence[Sequence[Any]],
    ids: Mapping[str, Mapping[int, int]],
    nullable: Mapping[str, bool],
) -> Remapped:
    """The rows (as read, their columns `names`) with their id dropped (the destination
    assigns one) and every link remapped, a column at a time: each id a link names looked up
    once, whatever the number of rows naming it."""
    keep = [
        at
        for at, name in enumerate(names)
        if name != ROWID and not (name == "id" and rule.key == "id")
    ]
    written = [names[at] for at in keep]
    columns = [list(map(itemgetter(at), rows)) for at in keep]
    later: dict[int, list[tuple[str, int]]] = {}
    orphans: set[int] = set()
    for column, target in rule.links.items():
        if column not in written:
            continue
        at = written.index(column)
        values = columns[at]
        get = ids[target].get
        mapped = {v: get(int(v)) for v in set(values) if v is not None}
        if None in mapped.values():
            for n, v in enumerate(values):
                if v is not None and mapped[v] is None:
                    if nullable[column]:
                        later.setdefault(n, []).append((column, int(v)))
                    else:
                        orphans.add(n)
        columns[at] = [None if v is None else mapped[v] for v in values]
    return Remapped(written, columns, later, orphans)
