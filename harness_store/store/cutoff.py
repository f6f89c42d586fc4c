"""A retention cutoff: the instant (UTC) before which a run or session counts as old, parsed
once from what a caller gives (`Cutoff.parse`, the forms of `harness_store.stamps`) and
compared as an instant from then on."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from ..errors import InvalidValueError
from ..stamps import ACCEPTED, Stamp

__all__ = ["ACCEPTED", "Cutoff"]

_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
"""Upstream's stamp (`strftime('%Y-%m-%dT%H:%M:%fZ')`): such stamps compare as text."""


class Cutoff(Stamp):
    """A `Stamp` that says which stored stamps are before it; `stamp` is it in upstream's
    stamp format."""

    @classmethod
    def parse(cls, value: object, name: str = "before") -> Cutoff:
        """The cutoff `value` means, or `InvalidValueError` naming the accepted forms."""
        return super().parse(value, name)

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

    @property
    def stamp(self) -> str:
        """The instant as upstream stamps rows (`Stamp.text`): text comparisons with such
        stamps are comparisons of instants."""
        return self.text

    def is_old(self, stamp: object) -> bool:
        """Whether the stored `stamp` is before this cutoff (None, a run from before
        io-harness 0.7, counts as old). A stamp that names no instant is not before it: what
        cannot be dated is kept."""
        if stamp is None:
            return True
        text = str(stamp)
        if _STAMP.fullmatch(text):
            return text < self.text or (text == self.text and self.instant.microsecond % 1000 != 0)
        found = Stamp.read(text)
        return found is not None and found.instant < self.instant
