"""Trace and span ids derived from the rows themselves, never drawn at random: exporting the
same rows again sends the same ids (see `SpanIds`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


def _digest(size: int, *parts: object) -> int:
    text = "\x1f".join(str(p) for p in parts).encode()
    value = int.from_bytes(hashlib.blake2b(text, digest_size=size).digest(), "big")
    return value or 1  # an all-zero id is invalid in OTLP


@dataclass(frozen=True)
class SpanIds:
    """Trace and span ids from the rows themselves: a tree's trace id from its root run (its
    id, start stamp and goal, which no prune of other runs can change and which travel with
    the store when it is copied or moved) and the export's `identity` (empty unless one is
    given: another identity gives other ids for the same rows); each span's id from its trace
    id, its table and its row id."""

    identity: str = ""

    def trace(self, root_run_id: int, started_at: str | None, goal: str) -> int:
        """The trace id of the tree rooted at the run `root_run_id`, started at `started_at`
        with `goal`."""
        return _digest(16, self.identity, "trace", root_run_id, started_at or "", goal)

    def span(self, trace_id: int, table: str, *key: object) -> int:
        """The span id of the row `key` of `table` in the trace `trace_id`."""
        return _digest(8, trace_id, table, *key)
