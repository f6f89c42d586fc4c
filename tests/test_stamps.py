"""One stamp type (`harness_store.stamps.Stamp`): the instant a caller's time or a stored
stamp names, in either of upstream's spellings, formatted and compared one way; and no other
module of the package parses or formats a stamp itself."""

from __future__ import annotations

import ast
import random
import re
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import Column, MetaData, Table, Text, create_engine, insert, select, text

from harness_store import Store
from harness_store.engine import to_url as url_of
from harness_store.errors import InvalidValueError
from harness_store.stamps import Stamp, day_after

PACKAGE = Path(__file__).resolve().parent.parent / "harness_store"

PARSERS = frozenset({"strptime", "fromisoformat"})
"""The calls that turn text into a time: made in `stamps.py` only."""

HOME = "stamps.py"

KNOWN: dict[str, str] = {}
"""Modules that call a parser on what is not a stamp: module -> why."""

FORMATTING = "%H:%M:%S"
"""A Python format of a stamp's time of day (SQL's `strftime` spells `%H:%M:%f`)."""

FORMATS_KNOWN: dict[str, str] = {}
"""Modules that still format a stamp themselves: module -> why."""


def test_both_upstream_spellings_are_one_instant() -> None:
    spaced = Stamp.read("2026-12-07 06:51:00")
    marked = Stamp.read("2026-12-07T06:51:00.000Z")
    assert spaced == marked
    assert spaced is not None and spaced.instant == datetime(2026, 12, 7, 6, 51, tzinfo=UTC)
    assert Stamp.read("2026-12-07T06:51:00Z") == marked


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("2026-12-07", datetime(2026, 12, 7, tzinfo=UTC)),
        ("2026-12-07T00", datetime(2026, 12, 7, tzinfo=UTC)),
        ("2026-12-07T06", datetime(2026, 12, 7, 6, tzinfo=UTC)),
        ("2026-12-07 23:59", datetime(2026, 12, 7, 23, 59, tzinfo=UTC)),
        ("2026-12-07T06:51:00.5Z", datetime(2026, 12, 7, 6, 51, 0, 500000, tzinfo=UTC)),
        ("2026-12-07T03:00+05:00", datetime(2026, 12, 6, 22, 0, tzinfo=UTC)),
        ("2026-12-07T03:00-0130", datetime(2026, 12, 7, 4, 30, tzinfo=UTC)),
        (datetime(2026, 12, 7, 3, tzinfo=timezone(timedelta(hours=5))),
         datetime(2026, 12, 6, 22, tzinfo=UTC)),
        (datetime(2026, 12, 7, 3), datetime(2026, 12, 7, 3, tzinfo=UTC)),
    ],
)  # fmt: skip
def test_a_callers_time_is_one_instant_utc(given: object, meant: datetime) -> None:
    assert Stamp.parse(given).instant == meant


@pytest.mark.parametrize(
    "given",
    [
        "yesterday", "20261207", "2026-W01-1", "2026-13-01", "2026-12-07T25", "", 7, None,
        "\u0662\u0660\u0662\u0666-12-07",  # Arabic-Indic digits, which Unicode's `\\d` matches
        "2026-12-07T\u0660\u0666:51",
        "2026-12-07T06:51+\u0660\u0665:00",
    ],
)  # fmt: skip
def test_anything_else_is_refused_typed(given: object) -> None:
    with pytest.raises(InvalidValueError, match="since"):
        Stamp.parse(given, "since")


def test_a_stored_value_that_is_no_time_reads_as_none() -> None:
    assert Stamp.read("soon") is None
    assert Stamp.read("\u0662\u0660\u0662\u0666-12-07 06:51:00") is None
    assert Stamp.read(None) is None
    assert Stamp.read("") is None


def test_formatted_as_upstream_stamps_rows() -> None:
    stamp = Stamp.parse("2026-12-07T03:00:01.123456+05:00")
    assert stamp.text == "2026-12-06T22:00:01.123Z"
    assert str(stamp) == stamp.text
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert stamp.ns == (stamp.instant - epoch) // timedelta(microseconds=1) * 1000
    assert Stamp.read(stamp.text) == Stamp.parse("2026-12-06T22:00:01.123Z")


@pytest.mark.parametrize(
    ("day", "after"),
    [
        ("2026-12-07", "2026-12-08"),
        ("2026-12-31", "2027-01-01"),
        ("2028-02-28", "2028-02-29"),
        ("9999-12-31", None),
        ("2026-02-30", None),
        ("(unknown)", None),
        ("20261207", None),
        ("\u0662\u0660\u0662\u0666-12-07", None),
    ],
)
def test_a_day_key_steps_to_the_next_day(day: str, after: str | None) -> None:
    """The spend counters' day keys (a stamp's first ten characters) step through `Stamp`:
    a key that names no day has no next one."""
    assert day_after(day) == after


def test_compared_as_instants() -> None:
    assert Stamp.parse("2026-12-07 23:59") > Stamp.parse("2026-12-07T06:50:00.000Z")
    assert Stamp.parse("2026-12-07T08:00+02:00") == Stamp.parse("2026-12-07T06:00Z")


def test_no_other_module_parses_stamps() -> None:
    """`strptime` and `fromisoformat` stand in `stamps.py` only: every other module asks the
    one stamp type, so a spelling upstream writes is read the same everywhere."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        module = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in PARSERS:
                found.add(module)
    assert found - {HOME} == set(KNOWN)


def test_no_other_module_formats_stamps() -> None:
    """A stamp's text is made by `Stamp` alone (`text`, `spaced`, `utc_text`)."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        module = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and FORMATTING in text:
                found.add(module)
    assert found - {HOME} == set(FORMATS_KNOWN)


def test_sql_keeps_exactly_the_stamps_at_or_after_the_instant(store_target: str) -> None:
    """`at_or_after` in SQL agrees with comparing instants, on both backends, for stamps in
    both spellings around day, second and millisecond edges and cutoffs between them (a few
    hundred of each: every edge case of the two ranges is among them)."""
    rng = random.Random(51)
    base = datetime(2026, 12, 6, 23, 59, 58, tzinfo=UTC)
    offsets = [timedelta(milliseconds=rng.randint(0, 4000)) for _ in range(300)]
    offsets += [timedelta(seconds=rng.randint(0, 3)) for _ in range(60)]
    stored = []
    for offset in offsets:
        stamp = Stamp(base + offset)
        stored.append(stamp.text)
        stored.append(f"{stamp.text[:10]} {stamp.text[11:19]}")  # datetime('now')'s spelling
    cuts = [base + timedelta(microseconds=rng.randint(0, 4_000_000)) for _ in range(120)]
    cuts += [base + timedelta(seconds=s, milliseconds=ms, microseconds=us)
             for s in (0, 1, 2) for ms in (0, 1, 999) for us in (0, 1, 999)]  # fmt: skip
    table = Table("stamped", MetaData(), Column("at", Text))
    engine = create_engine(url_of(store_target))
    try:
        with engine.begin() as conn:
            table.create(conn)
            conn.execute(insert(table), [{"at": at} for at in stored])
        with engine.connect() as conn:
            for cut in cuts:
                since = Stamp(cut)
                got = sorted(
                    conn.execute(select(table.c.at).where(since.at_or_after(table.c.at))).scalars()
                )
                want = sorted(at for at in stored if Stamp.read(at) >= since)  # type: ignore[operator]
                assert got == want, since
    finally:
        engine.dispose()


NOW_HOME = "sqldefaults.py"
"""Where each backend's SQL now is spelled (`NOW`), with the stamps made of it."""

SQL_NOWS = re.compile(
    r"'now'|\b(?:now|clock_timestamp|statement_timestamp|transaction_timestamp)\(\)"
    r"|\bcurrent_timestamp\b|\blocaltimestamp\b",
    re.IGNORECASE,
)
"""SQL's spellings of now: SQLite's `'now'` time value, PostgreSQL's clocks."""


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (prose, not SQL)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def test_sql_now_is_spelled_once_per_backend() -> None:
    """Every statement's now, every server default's and every elapsed time's is made of
    `sqldefaults.NOW`: no other module spells a clock in SQL (its prose may name one)."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        module = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        prose = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in prose
                and SQL_NOWS.search(node.value)
            ):
                found.add(module)
    assert found == {NOW_HOME}


def test_a_row_default_is_stamped_by_the_clock_the_store_stamps_by(store_target: str) -> None:
    """A row stamped by its column's default and one stamped by the Store's own SQL read one
    clock, the wall clock: in one transaction, a message sent after a run started is stamped
    at or after that start (PostgreSQL's `now()`, the transaction's start, stamped it
    before)."""
    with Store.open(store_target) as store:
        with store.transaction():
            first = store.start_run("goal", "file")
            time.sleep(0.01)  # the clock moves on past the transaction's start
            later = store.start_run("goal", "file")
            message = store.send_message(first, later, "agent", 1, "hello")
        with store.engine.connect() as conn:
            started = conn.execute(
                text("SELECT started_at FROM runs WHERE id = :id"), {"id": later}
            ).scalar_one()
            sent = conn.execute(
                text("SELECT sent_at FROM agent_messages WHERE id = :id"), {"id": message}
            ).scalar_one()
    assert Stamp.read(sent) >= Stamp.read(started)  # type: ignore[operator]
