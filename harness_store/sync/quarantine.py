"""Runs a sync holds back: a run one of whose rows holds a value the centre cannot hold as it
is (a NUL or a BLOB in PostgreSQL text, text or Infinity in an INTEGER column, text where a
run's id belongs) is not written to the centre's tables; its rows are kept byte-exact in
`hs_sync_quarantine` instead, and the host's other runs go on. What depends on such a run
waits with it: its child runs, runs whose rows link to it, and the sessions (with all their
turns) it is a turn of. A pass looks again at every run its origin holds back; one whose
rows the centre can now hold is released, and sent whole by that pass (its append rows
below the high-water mark sent again, as an archived run's are), exactly once.

A text whose bytes are not UTF-8 (which no read can take as text, into any centre) is found
on the failure path only: a pass whose read fails on one looks for every such text, and is
made again holding their runs, its source read with such texts decoded leniently (their rows
are held, never written).

Only values in rows of a run are held back: one in a session's row (which no run owns) or
in a row that names its run with no integer refuses its source by name, as before.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from typing import Any

from sqlalchemy import (
    Connection,
    LargeBinary,
    bindparam,
    case,
    cast,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.util import LRUCache

from ..dialects import Backend
from ..models.sync import QUARANTINE
from ..transfer.values import Refusal, refusals, undecodables
from .report import HeldRun
from .rows import EVENT_RUN_FIELDS, model_table, source_columns
from .rules import RULE_OF, RULES, RUNS, SESSIONS, TURNS, Rule

EVENTS = "run_events"
"""The table whose rows' JSON names runs (`event_links`)."""


class Unreadable(Exception):
    """A pass whose read of the source failed on texts whose bytes are not UTF-8, all of
    them in rows of runs: the pass is made again holding those runs (`found`: run → its
    first such text's table, row, column and what is wrong)."""

    def __init__(self, found: dict[int, tuple[str, str | None, str | None, str]]) -> None:
        super().__init__(f"texts not UTF-8 in the runs {sorted(found)}")
        self.found = found


FORMAT = 1
"""The version of `raw`'s JSON."""


class _AcrossSources(LRUCache[Any, Any]):
    """Compiled statements kept across passes and sources: SQLAlchemy keys a compiled
    statement by its dialect object, and each pass opens its source with an engine (and a
    dialect) of its own, so the large statements that look at held runs were compiled again
    on every pass (about 10 ms each, over a hundred a pass). Keyed here by what a compiled
    statement depends on instead: the dialect's class, server version and parameter style."""

    @staticmethod
    def _key(key: Any) -> Any:
        dialect = key[0]
        kind = (type(dialect), dialect.server_version_info, dialect.paramstyle)
        return (kind, *key[1:])

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(self._key(key), default)

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._key(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(self._key(key), value)


_STATEMENTS = _AcrossSources(500)


@contextmanager
def _compiled_once(src: Connection) -> Iterator[None]:
    """Within the body, `src` takes its compiled statements from `_STATEMENTS`."""
    before = src.get_execution_options().get("compiled_cache")
    src.execution_options(compiled_cache=_STATEMENTS)
    try:
        yield
    finally:
        if before is not None:  # else the engine's own: `_STATEMENTS` serves as well
            src.execution_options(compiled_cache=before)


def run_rules(have: Mapping[str, frozenset[str]]) -> list[tuple[Rule, str]]:
    """The tables a run's rows are in (that the source has), each with the column naming the
    run (the runs table: its id)."""
    out: list[tuple[Rule, str]] = []
    for rule in RULES:
        if rule.table not in have or rule.table == SESSIONS:
            continue
        column = "id" if rule.table == RUNS else rule.run_column
        if column is not None and column in have[rule.table]:
            out.append((rule, column))
    return out


def _find(
    src: Connection,
    have: Mapping[str, frozenset[str]],
    target: Backend,
    rule: Rule,
    *,
    above: int | None = None,
    runs: Iterable[int] | None = None,
) -> list[Refusal]:
    """The values of `rule`'s table the target cannot hold (`transfer.values.refusals`), each
    with its run; for the sessions table (no run's) with none."""
    column = "id" if rule.table == RUNS else rule.run_column
    table = model_table(rule)
    columns = source_columns(rule, have)
    if rule.table == SESSIONS or column is None:
        column = table.primary_key.columns.keys()[0]
        found = refusals(src, table, columns, target, column, above=above, links=rule.links)
        return [(None, row, col, said) for _, row, col, said in found]
    return refusals(
        src,
        table,
        columns,
        target,
        column,
        above=above,
        runs=None if runs is None else sorted(runs),
        links=rule.links,
    )


def _not_utf8(
    src: Connection, have: Mapping[str, frozenset[str]], runs: Iterable[int] | None = None
) -> list[tuple[str, Refusal]]:
    """Every text of the source whose bytes are not UTF-8 (of the runs `runs`, when given:
    then only the tables a run's rows are in), each with its table and run (None: a row no
    run owns, a session's): looked for only after a read of the source failed on one, or
    among the runs held back before (few rows)."""
    found: list[tuple[str, Refusal]] = []
    for rule in RULES:
        if rule.table not in have:
            continue
        column = "id" if rule.table == RUNS else rule.run_column
        if rule.table == SESSIONS or column is None or column not in have[rule.table]:
            if runs is not None:
                continue
            column = None
        table, columns = model_table(rule), source_columns(rule, have)
        chosen = None if runs is None else sorted(runs)
        found += [(rule.table, r) for r in undecodables(src, table, columns, column, runs=chosen)]
    return found


def _waiting(
    src: Connection,
    have: Mapping[str, frozenset[str]],
    held: dict[int, str],
    central: AbstractSet[int],
) -> dict[int, str]:
    """`held` (run → what is wrong) with every run that must wait for one of them: a run
    whose rows link to a held run that is not `central` already (a child run, a parent whose
    spawn names it), and so on. A link to a run the centre holds (as it was last sent)
    resolves: what links to it need not wait."""
    held = dict(held)
    pairs: list[tuple[Any, Any]] = []
    for rule, column in run_rules(have):
        table = model_table(rule)
        for link, target in rule.links.items():
            if target == RUNS and link != column and link in have[rule.table]:
                pairs.append((table.c[column], table.c[link]))
    pairs += event_links(have)
    grew = True
    while grew:
        grew = False
        absent = sorted(set(held) - central)
        if not absent:
            break
        for own, link in pairs:
            rows = src.execute(
                select(own, link).where(link.in_(absent), own.not_in(sorted(held))).distinct()
            )
            for run, linked in rows:
                if isinstance(run, int) and run not in held:
                    held[run] = f"waits for run {linked} of the same source, quarantined"
                    grew = True
    return held


def event_links(have: Mapping[str, frozenset[str]]) -> list[tuple[Any, Any]]:
    """A stored event's run and each run its JSON names (`rows.EVENT_RUN_FIELDS`), which a
    sync gives their central ids as it does a row's links: an event naming a held run waits
    with it, or it would keep the source's id (another run's, centrally) for good. JSON no
    reader can read names none. The other JSON and free text of a run's rows (an agent
    event's detail, a message's body) are sent as written, their ids never given central
    ones, so a held run they name changes nothing of them."""
    if "json" not in have.get(EVENTS, ()) or "run_id" not in have[EVENTS]:
        return []
    events = model_table(RULE_OF[EVENTS])
    return [
        (
            events.c.run_id,
            case(
                (func.json_valid(events.c.json), func.json_extract(events.c.json, f"$.{name}")),
                else_=None,
            ),
        )
        for name in EVENT_RUN_FIELDS
    ]


def _held_sessions(src: Connection, have: Mapping[str, frozenset[str]], runs: set[int]) -> set[int]:
    """The sessions a held run is a turn of: they wait (with all their turns) for it."""
    if not runs or TURNS not in have:
        return set()
    turns = model_table(RULES[2])
    rows = src.execute(
        select(turns.c.session_id).where(turns.c.run_id.in_(sorted(runs))).distinct()
    )
    return {int(s) for (s,) in rows if isinstance(s, int)}


_ENCODINGS: dict[tuple[str, tuple[str, ...]], Any] = {}
"""Each run table's statement that reads the rows of given runs byte-exact (`_encode`), by
table and the columns the source has: built once for every pass."""


def _encoding(rule: Rule, column: str, have: Mapping[str, frozenset[str]]) -> Any:
    table = model_table(rule)
    columns = source_columns(rule, have)
    key = (rule.table, tuple(c.name for c in columns))
    statement = _ENCODINGS.get(key)
    if statement is None:
        run = table.c[column]
        statement = _ENCODINGS[key] = (
            select(
                run,
                *(func.typeof(c) for c in columns),
                *(cast(c, LargeBinary) for c in columns),
                *(case((func.typeof(c) == "real", c), else_=None) for c in columns),
            )
            .where(run.in_(bindparam("runs", expanding=True)))
            .order_by(*table.primary_key.columns)
        )
    return statement, [c.name for c in columns]


def _encode(
    src: Connection, have: Mapping[str, frozenset[str]], runs: Iterable[int]
) -> dict[int, tuple[bytes, bool]]:
    """Every row of each run of `runs` in the source, byte-exact, as JSON (one statement per
    table for all of them): per table, the column names and each row's values as `[storage
    class, base64 of the bytes]` (a REAL also with its exact `float.hex`), NULL as null;
    with whether any of its texts has bytes that are not UTF-8."""
    wanted = sorted(set(runs))
    tables: dict[int, dict[str, Any]] = {run: {} for run in wanted}
    not_utf8 = dict.fromkeys(wanted, False)
    if not wanted:
        return {}
    for rule, column in run_rules(have):
        statement, names = _encoding(rule, column, have)
        n = len(names)
        for row in src.execute(statement, {"runs": wanted}):
            run = row[0]
            if not isinstance(run, int) or run not in tables:
                continue
            values: list[Any] = []
            for kind, raw, real in zip(
                row[1 : 1 + n], row[1 + n : 1 + 2 * n], row[1 + 2 * n :], strict=True
            ):
                if raw is None:
                    values.append(None)
                    continue
                data = bytes(raw)
                if kind == "text" and not not_utf8[run]:
                    try:
                        data.decode("utf-8")
                    except UnicodeDecodeError:
                        not_utf8[run] = True
                value = [str(kind), base64.b64encode(data).decode("ascii")]
                if real is not None:
                    value.append(float(real).hex())
                values.append(value)
            part = tables[run].setdefault(rule.table, {"columns": names, "rows": []})
            part["rows"].append(values)
    return {
        run: (
            json.dumps({"format": FORMAT, "tables": tables[run]}, sort_keys=True).encode("utf-8"),
            not_utf8[run],
        )
        for run in wanted
    }


def fingerprint(raw: bytes) -> int:
    """A 64-bit hash of a held run's rows as `encoded` gives them (signed, to fit a BIGINT
    mark): the next pass tells by it whether they changed."""
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big", signed=True)


def load(conn: Connection, origin_id: int) -> dict[int, HeldRun]:
    """The runs the centre holds for the origin, each as its entry names it (`new` False)."""
    rows = conn.execute(
        select(
            QUARANTINE.c.run_id,
            QUARANTINE.c.tbl,
            QUARANTINE.c.row_key,
            QUARANTINE.c.col,
            QUARANTINE.c.problem,
        ).where(QUARANTINE.c.origin_id == origin_id)
    )
    return {
        int(run): HeldRun(int(run), str(table), row, column, str(problem), new=False)
        for run, table, row, column, problem in rows
    }


def save(
    dst: Connection, origin_id: int, held: list[HeldRun], raw: Mapping[int, bytes], now: str
) -> None:
    """Write the quarantine entries of `held` (new ones inserted, the others brought up to
    date), each with its rows as the source holds them now (`raw`, `encoded`)."""
    for entry in held:
        values = {
            "tbl": entry.table,
            "row_key": entry.row,
            "col": entry.column,
            "problem": entry.problem,
            "raw": raw[entry.run],
            "last_seen": now,
        }
        if entry.new:
            dst.execute(
                insert(QUARANTINE).values(
                    origin_id=origin_id, run_id=entry.run, first_seen=now, **values
                )
            )
        else:
            dst.execute(
                update(QUARANTINE)
                .where(QUARANTINE.c.origin_id == origin_id, QUARANTINE.c.run_id == entry.run)
                .values(**values)
            )


def release(dst: Connection, origin_id: int, runs: Iterable[int]) -> None:
    """Delete the entries of runs sent whole (in the transaction that sends them)."""
    runs = sorted(runs)
    if runs:
        dst.execute(
            delete(QUARANTINE).where(
                QUARANTINE.c.origin_id == origin_id, QUARANTINE.c.run_id.in_(runs)
            )
        )


def find(src: Connection, *args: Any, **kwargs: Any) -> list[Refusal]:
    """`_find`, its statements compiled once (`_compiled_once`)."""
    with _compiled_once(src):
        return _find(src, *args, **kwargs)


def not_utf8(src: Connection, *args: Any, **kwargs: Any) -> list[tuple[str, Refusal]]:
    """`_not_utf8`, its statements compiled once (`_compiled_once`)."""
    with _compiled_once(src):
        return _not_utf8(src, *args, **kwargs)


def waiting(src: Connection, *args: Any, **kwargs: Any) -> dict[int, str]:
    """`_waiting`, its statements compiled once (`_compiled_once`)."""
    with _compiled_once(src):
        return _waiting(src, *args, **kwargs)


def held_sessions(src: Connection, *args: Any, **kwargs: Any) -> set[int]:
    """`_held_sessions`, its statements compiled once (`_compiled_once`)."""
    with _compiled_once(src):
        return _held_sessions(src, *args, **kwargs)


def encoded(
    src: Connection, have: Mapping[str, frozenset[str]], runs: Iterable[int]
) -> dict[int, tuple[bytes, bool]]:
    """`_encode`, its statements compiled once (`_compiled_once`)."""
    with _compiled_once(src):
        return _encode(src, have, runs)


def encode_rows(src: Connection, have: Mapping[str, frozenset[str]], run: int) -> bytes:
    """Every row of run `run` in the source, byte-exact, as JSON (`encoded`)."""
    return encoded(src, have, [run])[run][0]
