"""The one list of io-harness releases the interop tests run against.

Each entry is a release `../shared/oracle` builds an oracle for (`crates/vX_Y_Z`, binary
`oracle-X_Y[_Z]`). When the oracle folder gains a newer release, add it here and every
parametrised interop test covers it; nothing else changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness_store.releases import UPSTREAM_HEAD


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
        return tuple(int(p) for p in self.name.split("."))

    @property
    def after_upstream_head(self) -> bool:
        """Newer than the last release harness_store's chain models (0.13 today)."""
        return self.parts[:2] > tuple(int(p) for p in UPSTREAM_HEAD.split("."))

    @property
    def revision(self) -> str:
        """The Alembic revision holding this release's schema (0.8.1 changed none: `0.8`)."""
        return ".".join(str(p) for p in self.parts[:2])

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

UP_TO_HEAD = tuple(r for r in RELEASES if not r.after_upstream_head)
"""0.1 … 0.13: releases whose whole schema harness_store's chain has a revision for."""

OLD = tuple(r for r in UP_TO_HEAD if r.revision != UPSTREAM_HEAD)
"""0.1 … 0.12: the releases a store is upgraded from and downgraded to."""

NEWER = tuple(r for r in RELEASES if r.after_upstream_head)
"""Releases after 0.13 (0.18 … 0.66): their oracles have `open` and `dump`."""

HEAD_RELEASE = next(r for r in RELEASES if r.name == UPSTREAM_HEAD)
"""The release harness_store's Store API follows (0.13)."""

NEWER_WRITERS = tuple(r for r in NEWER if r.writes)


def ids(releases: tuple[OracleRelease, ...]) -> list[str]:
    """Test ids: the release names."""
    return [r.name for r in releases]
