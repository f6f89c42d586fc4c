"""`harness-store`: look into, upgrade, check, export and copy io-harness run stores.

    harness-store inspect DB            what the file is: release, revision, format, size, rows
    harness-store upgrade DB [--to REV] [--no-backup]
    harness-store downgrade DB --to REV [--no-backup]
    harness-store runs DB [--status S]  one line a run, newest first
    harness-store trace DB RUN          steps, policy events, approvals, checkpoints in order
    harness-store tree DB RUN           the agent tree under a run, with totals
    harness-store memory DB WORKSPACE   a workspace's memory entries
    harness-store copy SRC DST          a whole store between SQLite and PostgreSQL
    harness-store spend DB [--by model|day|run] [--since TIME] [--prices FILE]
    harness-store events DB [--run RUN] [--after CURSOR] [--follow]   the event stream, live
    harness-store patch DB RUN          a run's change as a patch series
    harness-store approve DB RUN        decide a paused run's actions (--deny) or plans (--plan)
    harness-store answer DB RUN ANSWER  answer a paused run's open question
    harness-store size DB               bytes in use and free, sessions, runs, largest tables
    harness-store prune DB --before DATE [--dry-run] [--archive] [--yes]
    harness-store prune DB --runs --older-than 30d [--status S] [--keep-last N] [--archive-to F]
    harness-store check DB [--json] [--repair]   integrity, schema, resumable runs, orphans, spend
    harness-store compact DB [--yes]    give the space deletions freed back (VACUUM)
    harness-store sync SRC... DST       many stores into one, incrementally [--mark] [--dry-run]
    harness-store origins DB            the stores synced into a store
    harness-store export otlp DB --endpoint URL   runs as OpenTelemetry traces (Phoenix, Jaeger)
    harness-store export parquet DB DIR           a Parquet dataset, one directory a table

DB is a file path or a SQLAlchemy URL; a password in a URL is never printed. The read commands
(inspect, runs, trace, tree, memory) open the store read-only — SQLite through a `mode=ro` URI,
PostgreSQL with `default_transaction_read_only` — so they cannot upgrade, stamp or switch the
journal mode of what they read. They read any store holding the whole 0.13 schema (at head, at
0.13, or written by a newer io-harness); an older or torn store is refused with exit code 3 and a
pointer to `harness-store upgrade`. `--json` prints machine-readable output instead of text.
Output to a terminal is drawn with Rich; piped output is plain text without ANSI codes.

Errors are one line on stderr and an exit code:

    0  done
    1  any other failure (a read-only store to upgrade, copy support missing, a driver error)
    2  usage: bad arguments or options, an unusable URL, an unknown or lower `--to` revision
    3  not a readable run store: no file there; not SQLite (empty file, directory, FIFO, other);
       another application's database; a newer checkpoint format (user_version above 7); a
       damaged file (for check, a finding: 6); for the read commands, a store older than
       0.13 or torn, which needs `harness-store upgrade`
    4  locked: another process held the store past the busy timeout (5 s)
    5  not in the store: no run with that id (or nothing open to approve or answer)
    6  check: the store has problems (after --repair: problems are left)
  130  interrupted by Ctrl-C (upgrade and downgrade say where they left the store); a stopped
       copy exits 1, and --follow ends with 0

Set HARNESS_STORE_DEBUG=1 to see the traceback of an unexpected error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:
    from ..engine import read_only_url as read_only_url
from . import (  # noqa: F401  (register commands)
    check,
    copy,
    decide,
    events,
    export,
    inspect,
    memory,
    retention,
    roles,
    runs,
    spend,
    sync,
    trace,
    tree,
    upgrade,
)
from .app import app, main

__all__ = ["app", "main", "read_only_url"]

__getattr__ = lazy_names(__name__, {"read_only_url": ".engine"})  # harness_store.engine
"""`read_only_url` is `engine.read_only_url` (the one implementation), imported on first use:
the command's start-up loads no SQLAlchemy."""
