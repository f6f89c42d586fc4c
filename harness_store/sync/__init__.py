"""Incremental sync of many io-harness SQLite stores into one central store (PostgreSQL or
SQLite): `sync(sources, dest)`, the `harness-store sync` command.

Each source is an **origin** (`origins`): a UUID, written into the source only with
`mark=True`, else the source is recognised by its file identity. Every row is re-keyed
centrally and every link (`run_id`, `parent_run_id`, `child_run_id`, `from_run_id`/`to_run_id`,
`session_id`, `parent_turn_id`, `head_turn_id`) remapped through the destination's id maps
(`models.sync`), which answer "which central run is run 12 of that store" both ways (`lookup`).
How a change is found differs per table (`rules`): append-only tables by a high-water mark,
tables upstream updates in place or deletes from by a hash of each row.

A source is opened through the one read-only open and read in one snapshot of its Store's
connector (consistent while io-harness keeps writing), leaving no side files
(`transfer.reading`), and its pages are quick-checked before
anything of it is written; its changes are written together with the id maps and marks (in
one destination transaction, or into a SQLite centre in slices, each with the maps and marks
of its own rows), so a sync is idempotent and a sync killed at any point is completed by the
next. A source whose history went backwards (a restored backup) is read
again in full. A source that cannot be synced (damaged, too old, of a newer io-harness) is
left out whole while the others are synced, and `sync` then raises `SyncRefusedError`.

`follow(sources, dest)` keeps syncing until stopped: each source's pass is made when its
files show a commit (`follow`, `watch`), through the same pass as `sync`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:
    from ..store.check_quarantine import QuarantinedRun
    from .core import sync
    from .follow import follow
    from .follow_report import FollowNotice, FollowPass, FollowReport
    from .lookup import (
        OriginInfo,
        central_run,
        list_origins,
        origin_runs,
        quarantined,
        source_run,
    )
    from .report import (
        DuplicateOriginError,
        HeldRun,
        OriginReport,
        Progress,
        RefusedSource,
        SyncRefusedError,
        SyncReport,
        TableCounts,
    )
    from .rules import RULES, Rule

LAZY = {
    "sync": "core",
    "follow": "follow",
    **dict.fromkeys(("FollowNotice", "FollowPass", "FollowReport"), "follow_report"),
    **dict.fromkeys(
        ("OriginInfo", "central_run", "list_origins", "origin_runs", "quarantined", "source_run"),
        "lookup",
    ),
    **dict.fromkeys(
        (
            "DuplicateOriginError",
            "HeldRun",
            "OriginReport",
            "Progress",
            "RefusedSource",
            "SyncRefusedError",
            "SyncReport",
            "TableCounts",
        ),
        "report",
    ),
    **dict.fromkeys(("RULES", "Rule"), "rules"),
    "QuarantinedRun": ".store.check_quarantine",
}
"""Where each public name lives, relative to this package (`.store.check_quarantine`: the
Store's, a layer below): imported on first use, so that the modules of sync a lower layer
reads (`report`, what a refused sync carries; `rules`, facts about the tables) load none of
sync's machinery (the Store, the connector, the copy) with them."""


__getattr__ = lazy_names(__name__, LAZY)


__all__ = [
    "RULES",
    "DuplicateOriginError",
    "FollowNotice",
    "FollowPass",
    "FollowReport",
    "HeldRun",
    "OriginInfo",
    "OriginReport",
    "Progress",
    "QuarantinedRun",
    "RefusedSource",
    "Rule",
    "SyncRefusedError",
    "SyncReport",
    "TableCounts",
    "central_run",
    "follow",
    "list_origins",
    "origin_runs",
    "quarantined",
    "source_run",
    "sync",
]
