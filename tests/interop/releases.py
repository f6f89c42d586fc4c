"""The one list of io-harness releases the interop tests run against.

Each entry is a release `../shared/oracle` builds an oracle for (`crates/vX_Y_Z`, binary
`oracle-X_Y[_Z]`), with what its CLI offers: every oracle has `open` and `dump`; through
0.13 (`STORE_RELEASE`) also `write` and `resume`, and its `dump` is JSON of 0.13-era getters;
after 0.13 the `dump` is upstream's Debug rendering and only some have `write` (0.66). When the
oracle folder gains a newer release, add it here and every parametrised interop test covers it
as its CLI allows; nothing else changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness_store.releases import HEAD, STORE_RELEASE, revision_for


def _parts(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in name.split("."))


@dataclass(frozen=True)
class OracleRelease:
    """One release as the oracle builds it and as harness_store's chain names it."""

    name: str
    """The release, `"0.8.1"`; the binary is `oracle-0_8_1`."""
    writes: bool = False
    """Whether its oracle has `write` (every release up to 0.13; after that only some)."""

    @property
    def binary(self) -> str:
        return "oracle-" + self.name.replace(".", "_")

    @property
    def parts(self) -> tuple[int, ...]:
        return _parts(self.name)

    @property
    def classic(self) -> bool:
        """Its oracle has the 0.13-era CLI: JSON `dump`, `write` and `resume` (0.1 … 0.13)."""
        return self.parts[:2] <= _parts(STORE_RELEASE)

    @property
    def resumes(self) -> bool:
        """Whether its oracle has `resume` (the classic CLI only)."""
        return self.classic

    @property
    def revision(self) -> str:
        """The Alembic revision holding this release's schema (0.8.1 changed none: `0.8`)."""
        return revision_for(self.name)

    @property
    def at_head(self) -> bool:
        """Its revision is the head (none today: 0.65 and 0.66 are `0.65`, one below `hs2`)."""
        return self.revision == HEAD

    def __str__(self) -> str:
        return self.name


NEWER_MINORS = (
    18,
    20,
    21,
    22,
    25,
    28,
    29,
    30,
    31,
    32,
    33,
    34,
    36,
    37,
    43,
    51,
    56,
    58,
    60,
    62,
    64,
    65,
)
"""Releases after 0.13 with an oracle but no `write` (every schema-changing tag, and 0.29)."""

RELEASES: tuple[OracleRelease, ...] = (
    *(OracleRelease(f"0.{minor}", writes=True) for minor in range(1, 9)),
    OracleRelease("0.8.1", writes=True),
    *(OracleRelease(f"0.{minor}", writes=True) for minor in range(9, 14)),
    *(OracleRelease(f"0.{minor}") for minor in NEWER_MINORS),
    OracleRelease("0.66", writes=True),
)

CLASSIC = tuple(r for r in RELEASES if r.classic)
"""0.1 … 0.13: oracles with `write`, `resume` and a JSON dump; also what support.legacy builds."""

NEWER = tuple(r for r in RELEASES if not r.classic)
"""Releases after 0.13 (0.18 … 0.66): their oracles have `open` and `dump` (Debug rendering)."""

NEWER_WRITERS = tuple(r for r in NEWER if r.writes)
"""Newer releases whose oracle also has `write` (0.66)."""

BELOW_HEAD = tuple(r for r in RELEASES if not r.at_head)
"""Every release a head store can be downgraded to (0.1 … 0.66)."""

API_RELEASE = next(r for r in RELEASES if r.name == STORE_RELEASE)
"""The release whose Store API harness_store's `Store` and tests/interop/hsdump.py mirror (0.13):
its oracle writes the rich stores and dumps what `harness_dump` reads."""


def ids(releases: tuple[OracleRelease, ...]) -> list[str]:
    """Test ids: the release names."""
    return [r.name for r in releases]
