"""The one stamp type: an instant, UTC, parsed from what a caller gives or a store holds,
formatted as upstream stamps its rows, and compared as an instant, in Python and in SQL.

upstream writes two spellings: `strftime('%Y-%m-%dT%H:%M:%fZ','now')`
(`2026-12-07T06:51:00.000Z`) on most columns and `datetime('now')` (`2026-12-07 06:51:00`,
seconds, UTC) on the tables of 0.18 onwards that stamp rows in SQL (`provider_calls.at` among
them). As text a space sorts before a `T`, so the two never compare as text; every reading,
formatting and comparison of a stamp goes through `Stamp`.

A caller's time (`Stamp.parse`) is a date `YYYY-MM-DD` (that day's start, UTC), or a date and
time `YYYY-MM-DDTHH[:MM[:SS[.f]]]` (`T` or a space between them) with an optional `Z` or
`±HH[:]MM` offset (none means UTC), or a `datetime` (a naive one is taken as UTC). Every other
form `fromisoformat` would take (`20261207`, week dates, ordinal dates) is refused: it is not
what a reader of the store's stamps would expect it to mean.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta
from functools import cached_property, total_ordering
from typing import Any, Self

from sqlalchemy import ColumnElement, String, and_, bindparam, or_
from sqlalchemy.orm import QueryableAttribute

from .errors import InvalidValueError

ACCEPTED = (
    "a date like 2026-01-31 or a stamp like 2026-01-31T12:00:00, "
    "optionally with Z or an offset like +05:00 (UTC when none)"
)
"""The forms a caller's time takes, as the errors name them."""

_FORM = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})"
    r"(?:[T ]([0-9]{2})(?::([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,9}))?)?)?\s*"
    r"(Z|z|[+-][0-9]{2}:?[0-9]{2})?)?"
)
"""A caller's time. Digits are ASCII, as in every pattern of a stamp (Unicode's `\\d` also
matches other scripts' digits, `٢٠٢٦`, which `int` reads but no stamp holds); the space before
a zone is any space, as `hs_stamp` reads it on PostgreSQL."""
_SPELLED = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}:\d{2}\.\d{3}Z| \d{2}:\d{2}:\d{2})", re.ASCII
)
"""upstream's two spellings exactly, which `read` hands to `fromisoformat` (an export reads
one stamp a row)."""
_DAY_KEY = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
"""A day key (`YYYY-MM-DD`), as the spend counters group calls by their stamp's first ten
characters."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_AT, _SPACED, _DAY = "since_at", "since_spaced", "since_day"
"""The names of `Stamp.bounds`, the parameters of `bound_at_or_after`."""
_MS = timedelta(milliseconds=1)
_SECOND = timedelta(seconds=1)


@total_ordering
class Stamp:
    """An instant, UTC (`instant`, an aware `datetime`); equal and ordered by the instant."""

    def __init__(self, instant: datetime) -> None:
        self.instant = instant

    @classmethod
    def parse(cls, value: object, name: str = "the time") -> Self:
        """The instant a caller's `value` means (a `Stamp`, a `datetime` or text in the forms of
        the module's docstring), or `InvalidValueError` naming `name` and the accepted forms."""
        if isinstance(value, Stamp):
            return value if type(value) is cls else cls(value.instant)
        if isinstance(value, datetime):
            moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
            return cls._at(moment, None, value, name)
        if not isinstance(value, str):
            raise InvalidValueError(f"{name} takes {ACCEPTED}, not {value!r}")
        match = _FORM.fullmatch(value.strip())
        if match is None:
            raise InvalidValueError(f"{name} takes {ACCEPTED}, got {value!r}")
        year, month, day, hour, minute, second, fraction, zone = match.groups()
        try:
            moment = datetime(
                int(year),
                int(month),
                int(day),
                int(hour or 0),
                int(minute or 0),
                int(second or 0),
                int((fraction or "0")[:6].ljust(6, "0")),
                tzinfo=UTC,
            )
        except ValueError:
            raise InvalidValueError(f"{name} is not a real date or time: {value!r}") from None
        if zone and zone not in ("Z", "z"):
            sign = -1 if zone[0] == "-" else 1
            digits = zone[1:].replace(":", "")
            offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
            if offset >= timedelta(hours=24):
                raise InvalidValueError(f"{name} has an offset of a day or more: {value!r}")
            return cls._at(moment, sign * offset, value, name)
        return cls(moment)

    @classmethod
    def _at(cls, moment: datetime, shift: timedelta | None, value: object, name: str) -> Self:
        try:
            if shift is not None:
                return cls(moment - shift)
            return cls(moment.astimezone(UTC))
        except OverflowError:
            raise InvalidValueError(f"{name} is outside the years 1 to 9999: {value!r}") from None

    @classmethod
    def read(cls, value: object) -> Stamp | None:
        """A stored stamp (either of upstream's spellings, or any form `parse` takes) as an
        instant; None for no stamp or a value that names no instant."""
        if not isinstance(value, str) or not value:
            return None
        if _SPELLED.fullmatch(value):
            try:
                return cls(datetime.fromisoformat(value).replace(tzinfo=UTC))
            except ValueError:
                return None  # digits in the shape of a stamp that name no day (2026-13-45)
        try:
            return cls.parse(value)
        except InvalidValueError:
            return None

    @classmethod
    def now(cls) -> Self:
        """This process's clock, now."""
        return cls(datetime.now(UTC))

    @cached_property
    def text(self) -> str:
        """The instant as upstream stamps rows (`2026-01-31T12:00:00.000Z`), rounded down to
        the millisecond."""
        return _upstream(self.instant)

    @property
    def ns(self) -> int:
        """Nanoseconds since the epoch (microsecond precision; exact: a whole second's
        `timestamp()` is an exact float)."""
        moment = self.instant
        whole = int(moment.replace(microsecond=0).timestamp())
        return whole * 1_000_000_000 + moment.microsecond * 1000

    @cached_property
    def spaced(self) -> str:
        """The first `datetime('now')` stamp (`YYYY-MM-DD HH:MM:SS`) at or after this instant,
        as text that such stamps compare with as instants: a day's start is the day alone
        (`2026-12-07`, which each stamp of that day sorts after), any other instant is rounded
        up to its second."""
        if self.instant.time() == time(0):
            return _day(self.instant)
        moment = _ceiling(self.instant, _SECOND)
        return f"{_day(moment)} {moment:%H:%M:%S}"

    def at_or_after(
        self, column: ColumnElement[Any] | QueryableAttribute[Any]
    ) -> ColumnElement[bool]:
        """SQL: `column`'s stamp (either spelling) is at or after this instant. Two ranges of
        the column's text, so an index on it serves both: upstream's stamps from this instant
        (rounded up to their millisecond), which also hold every `datetime('now')` stamp of a
        later day (`2026-12-08 …` sorts after `2026-12-07T…`); and the `datetime('now')`
        stamps of that millisecond's own day from this instant (rounded up to their second),
        which sort before the day's `T`."""
        bounds = self.bounds
        return or_(
            column >= bounds[_AT],
            and_(column >= bounds[_SPACED], column < bounds[_DAY]),
        )

    @cached_property
    def bounds(self) -> dict[str, str]:
        """The three texts `at_or_after` compares a column with, keyed by the names of the
        parameters `bound_at_or_after` takes them as."""
        first = _ceiling(self.instant, _MS)
        return {_AT: _upstream(first), _SPACED: self.spaced, _DAY: f"{_day(first)}T"}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Stamp):
            return NotImplemented
        return self.instant == other.instant

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Stamp):
            return NotImplemented
        return self.instant < other.instant

    def __hash__(self) -> int:
        return hash(self.instant)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.text!r})"

    def __str__(self) -> str:
        return self.text


def bound_at_or_after(column: ColumnElement[Any]) -> ColumnElement[bool]:
    """`Stamp.at_or_after` with its texts as bound parameters, for a statement built once:
    executed with a stamp's `bounds`."""
    at, spaced, day = (bindparam(name, type_=String) for name in (_AT, _SPACED, _DAY))
    return or_(column >= at, and_(column >= spaced, column < day))


def _day(moment: datetime) -> str:
    return f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"


def _upstream(moment: datetime) -> str:
    return f"{_day(moment)}T{moment:%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def _ceiling(moment: datetime, unit: timedelta) -> datetime:
    """`moment` rounded up to a whole `unit` (past the year 9999: unchanged, where no stamp is)."""
    over = (moment - _EPOCH) % unit
    if not over:
        return moment
    try:
        return moment - over + unit
    except OverflowError:
        return moment


def day_after(day: str) -> str | None:
    """The day after a `YYYY-MM-DD` day key (the upper end of that day's stamps), or None for
    a key that names no day and for 9999-12-31, after which no day is."""
    if not _DAY_KEY.fullmatch(day):
        return None
    try:
        return _day(Stamp.parse(day).instant + timedelta(days=1))
    except (InvalidValueError, OverflowError):
        return None


def utc_text(value: str) -> str:
    """A stored stamp as `YYYY-MM-DD HH:MM:SS` in UTC (an offset converted), as the command's
    columns headed "(UTC)" show it; a value that names no instant as it is."""
    found = Stamp.read(value)
    if found is None:
        return value
    moment = found.instant
    return f"{_day(moment)} {moment:%H:%M:%S}"
