"""`harness-store size`, `prune` and `compact`: how big a store is, deleting (or archiving)
old sessions, and giving the freed space back.

`prune` deletes one session at a time, each in its own transaction (all of it or none of it,
never an orphan), with a progress bar on a terminal; an interrupted prune leaves every session
either whole or gone. Sessions holding a run that can still resume are kept and listed. Both
`prune` and `compact` ask first unless `--yes`; `--dry-run` only says what would go.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Annotated

import typer
from rich.text import Text

from .app import EPILOG, EXIT_USAGE, CliError, DbArg, JsonOpt, app
from .decide import open_writer
from .output import (
    Column,
    emit_json,
    emit_pairs,
    emit_table,
    human_size,
    plural,
    progress_bars,
    stderr_console,
    stdout_console,
)
from .reader import open_reader

YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


def confirm(question: str, yes: bool) -> None:
    """Ask on a terminal unless `--yes`; without a terminal, `--yes` is required."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise CliError(EXIT_USAGE, f"{question} — not asked without a terminal: add --yes")
    if not typer.confirm(question, default=False, err=True):
        raise CliError(EXIT_USAGE, "nothing was changed")


def check_date(before: str) -> str:
    """A date or ISO stamp, as sessions' `created_at` compares with it (text)."""
    try:
        datetime.fromisoformat(before.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(
            EXIT_USAGE, f"--before takes a date like 2026-01-31 or an ISO stamp, got {before!r}"
        ) from None
    return before


@app.command("size", epilog=EPILOG)
def size_command(db: DbArg, as_json: JsonOpt = False) -> None:
    """How big the store is: bytes in use and free, sessions, runs, and the largest tables and
    indexes. Read-only."""
    with open_reader(db) as reader:
        size = reader.store.store_size()
    if as_json:
        emit_json(
            {
                "file_bytes": size.file_bytes,
                "free_bytes": size.free_bytes,
                "sessions": size.sessions,
                "runs": size.runs,
                "tables": [{"name": n, "bytes": b} for n, b in size.tables],
            }
        )
        return
    emit_pairs(
        [
            ("size", human_size(size.file_bytes)),
            ("free", human_size(size.free_bytes) + " (given back by `compact`)"),
            ("sessions", f"{size.sessions:,}"),
            ("runs", f"{size.runs:,}"),
        ]
    )
    if size.tables:
        emit_table(
            [Column("table or index"), Column("bytes", "right")],
            [(name, f"{n:,}") for name, n in size.tables[:15]],
        )


@app.command("prune", epilog=EPILOG)
def prune_command(
    db: DbArg,
    before: Annotated[
        str, typer.Option("--before", metavar="DATE", help="Sessions created before this date.")
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would go; change nothing.")
    ] = False,
    archive: Annotated[
        bool,
        typer.Option("--archive", help="Clear the sessions' words but keep their shape and facts."),
    ] = False,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete (or --archive) every session created before DATE, with its turns, runs and
    every row of theirs; sessions whose runs can still resume are kept."""
    before = check_date(before)
    totals = {"sessions": 0, "turns": 0, "runs": 0, "rows": 0, "bytes": 0}
    with open_writer(db) as store:
        doomed, refused = store.sweep_candidates(before)
        sizes = [store.session_size(s) for s in doomed]
        would = {
            "sessions": len(doomed),
            "turns": sum(s.turns for s in sizes if s),
            "runs": sum(s.runs for s in sizes if s),
            "rows": sum(s.rows for s in sizes if s),
            "bytes": sum(s.bytes for s in sizes if s),
        }
        verb = "archive" if archive else "delete"
        if dry_run or not doomed:
            report(would, refused, verb, dry_run=True, as_json=as_json)
            return
        confirm(
            f"{verb} {plural(len(doomed), 'session')} ({plural(would['runs'], 'run')}, "
            f"{plural(would['rows'], 'row')}) created before {before}?",
            yes,
        )
        with progress_bars(stderr_console(), quiet=as_json, label=verb) as bars:
            task = bars.add_task(verb, total=len(doomed)) if bars else None
            for i, session in enumerate(doomed, start=1):
                if archive:
                    done = store.archive_session(session)
                    totals["sessions"] += 1
                    totals["turns"] += done.turns
                    totals["rows"] += done.rows
                    totals["bytes"] += done.bytes
                else:
                    pruned = store.delete_session(session)
                    for key in ("sessions", "turns", "runs", "rows", "bytes"):
                        totals[key] += getattr(pruned, key)
                if bars is not None and task is not None:
                    bars.update(task, completed=i)
    report(totals, refused, verb, dry_run=False, as_json=as_json)


def report(
    totals: dict[str, int], refused: list[int], verb: str, *, dry_run: bool, as_json: bool
) -> None:
    if as_json:
        emit_json({**totals, "refused": refused, "dry_run": dry_run, "action": verb})
        return
    done = f"would {verb}" if dry_run else f"{verb}d"
    line = (
        f"{done} {plural(totals['sessions'], 'session')}, {plural(totals['turns'], 'turn')}, "
        f"{plural(totals['rows'], 'row')}, {totals['bytes']:,} characters of text"
    )
    if verb == "delete":
        line += f", {plural(totals['runs'], 'run')}"
    stdout_console().print(Text(line))
    if refused:
        kept = ", ".join(str(s) for s in refused)
        stdout_console().print(Text(f"kept (a run can still resume): sessions {kept}"))


@app.command("compact", epilog=EPILOG)
def compact_command(db: DbArg, yes: YesOpt = False, as_json: JsonOpt = False) -> None:
    """Give the space freed by deletions back: SQLite rewrites the file (VACUUM; writers wait
    meanwhile), PostgreSQL marks dead rows' space reusable (VACUUM)."""
    with open_writer(db) as store:
        before = store.store_size()
        confirm(
            f"compact {human_size(before.file_bytes)} ({human_size(before.free_bytes)} free)?", yes
        )
        if not as_json:
            stderr_console().print(Text("compacting…"))
        reclaimed = store.compact()
        after = store.store_size()
    if as_json:
        emit_json({"reclaimed_bytes": reclaimed, "file_bytes": after.file_bytes})
        return
    stdout_console().print(
        Text(f"reclaimed {human_size(reclaimed)}; the store is {human_size(after.file_bytes)}")
    )
