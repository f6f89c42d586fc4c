"""A retention cutoff: the instant (UTC) before which a run or session counts as old, parsed
once from what a caller gives (`Cutoff.parse`) and compared as an instant from then on.

Accepted: a date `YYYY-MM-DD` (midnight UTC), or a date and time `YYYY-MM-DDTHH:MM[:SS[.f]]`
(`T` or a space between them) with an optional `Z` or `±HH:MM` offset (none means UTC), or an
aware `datetime` (a naive one is taken as UTC). Refused: every other form `fromisoformat`
would take (`20260101`, week dates `2026-W01-1`, ordinal dates), which a text comparison with
the stored stamps would misread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property

from ..errors import InvalidValueError

ACCEPTED = (
    "a date like 2026-01-31 or a stamp like 2026-01-31T12:00:00, "
    "optionally with Z or an offset like +05:00 (UTC when none)"
)
"""The forms a cutoff takes, as the errors name them."""

_FORM = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?\s*(Z|z|[+-]\d{2}:?\d{2})?)?"
)
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
"""Upstream's stamp (`strftime('%Y-%m-%dT%H:%M:%fZ')`): such stamps compare as text."""


@dataclass(frozen=True, order=True)
class Cutoff:
    """An instant, UTC; `stamp` is it in upstream's stamp format."""

    instant: datetime

    @classmethod
    def parse(cls, value: object, name: str = "before") -> Cutoff:
        """The cutoff `value` means, or `InvalidValueError` naming the accepted forms."""
        if isinstance(value, Cutoff):
            return value
        if isinstance(value, datetime):
            moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
            return cls._at(moment, value, name)
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
            moment = moment.replace(tzinfo=None)
            return cls._at(moment, value, name, shift=sign * offset)
        return cls(moment)

    @classmethod
    def _at(
        cls, moment: datetime, value: object, name: str, shift: timedelta | None = None
    ) -> Cutoff:
        try:
            if shift is not None:
                return cls((moment - shift).replace(tzinfo=UTC))
            return cls(moment.astimezone(UTC))
        except OverflowError:
            raise InvalidValueError(f"{name} is outside the years 1 to 9999: {value!r}") from None

    @classmethod
    def ago(cls, amount: int, unit: str) -> Cutoff:
        """Now less `amount` `unit`s ("weeks", "days", "hours", "minutes"); an age reaching
        before the year 1 is `InvalidValueError`."""
        try:
            return cls(datetime.now(UTC) - timedelta(**{unit: amount}))
        except OverflowError:
            raise InvalidValueError(
                f"an age of {amount:,} {unit} reaches before the year 1"
            ) from None

    @cached_property
    def stamp(self) -> str:
        """The instant as upstream stamps rows (`2026-01-31T12:00:00.000Z`), rounded down to
        the millisecond: text comparisons with such stamps are comparisons of instants.
        Kept once made: a prune compares it with every run's stamp."""
        i = self.instant
        return i.strftime("%Y-%m-%dT%H:%M:%S.") + f"{i.microsecond // 1000:03d}Z"

    def is_old(self, stamp: object) -> bool:
        """Whether the stored `stamp` is before this cutoff (None, a run from before
        io-harness 0.7, counts as old). A stamp that names no instant is not before it: what
        cannot be dated is kept."""
        if stamp is None:
            return True
        text = str(stamp)
        if _STAMP.fullmatch(text):
            return text < self.stamp or (
                text == self.stamp and self.instant.microsecond % 1000 != 0
            )
        try:
            return Cutoff.parse(text).instant < self.instant
        except InvalidValueError:
            return False

    def __str__(self) -> str:
        return self.stamp
