"""`harness-store size`, `prune` and `compact`: how big a store is, deleting (or archiving)
old sessions or run trees, and giving the freed space back.

`prune` deletes one session at a time, each decided again and deleted in its own transaction
(all of it or none of it, never an orphan), with a progress bar on a terminal; an interrupted
prune leaves every session either whole or gone. `prune --runs` does the same for whole run
trees, in batches (`Store.prune_runs`), optionally copying them into an archive file first.
Anything still in use is kept and listed. Both `prune` and `compact` ask first unless
`--yes`; `--dry-run` only says what would go (for runs, opening the store read-only).
"""

from __future__ import annotations

import re
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import ArchiveRefusedError, DiskFullError, InvalidValueError
from .app import EPILOG, EXIT_USAGE, CliError, DbArg, JsonOpt, SchemaOpt, app
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
from .reader import in_schema, open_reader, parse_target

if TYPE_CHECKING:
    from ..records import Pruned
    from ..store import Store
    from ..store.cutoff import Cutoff


YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


def confirm(question: str, yes: bool) -> None:
    """Ask on a terminal unless `--yes`; without a terminal, `--yes` is required."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise CliError(EXIT_USAGE, f"{question} — not asked without a terminal: add --yes")
    if not typer.confirm(question, default=False, err=True):
        raise CliError(EXIT_USAGE, "nothing was changed")


def cutoff_of(before: str | None, older_than: str | None) -> Cutoff:
    """The cutoff from `--before DATE` or `--older-than AGE` (exactly one of them), parsed
    here once into an instant (UTC)."""
    from ..store.cutoff import Cutoff

    if (before is None) == (older_than is None):
        raise CliError(EXIT_USAGE, "give one of --before DATE or --older-than AGE (e.g. 30d)")
    try:
        if before is not None:
            return Cutoff.parse(before, "--before")
        assert older_than is not None
        match = re.fullmatch(r"\s*(\d+)\s*([dhmw])\s*", older_than)
        if match is None:
            raise CliError(
                EXIT_USAGE,
                f"--older-than takes an age like 30d, 12h, 90m or 2w, got {older_than!r}",
            )
        unit = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes"}[match.group(2)]
        return Cutoff.ago(int(match.group(1)), unit)
    except InvalidValueError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None


@app.command("size", epilog=EPILOG)
def size_command(db: DbArg, as_json: JsonOpt = False, schema: SchemaOpt = None) -> None:
    """How big the store is: bytes in use and free, sessions, runs, and the largest tables and
    indexes. Read-only."""
    db = in_schema(db, schema)
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
        str | None,
        typer.Option("--before", metavar="DATE", help="Sessions (or runs) from before this date."),
    ] = None,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than", metavar="AGE", help="Instead of --before: an age such as 30d or 12h."
        ),
    ] = None,
    runs: Annotated[
        bool,
        typer.Option("--runs", help="Prune runs (whole trees) instead of sessions."),
    ] = False,
    status: Annotated[
        list[str] | None,
        typer.Option(
            "--status", metavar="STATUS", help="With --runs: statuses to prune (completed, failed)."
        ),
    ] = None,
    keep_last: Annotated[
        int | None,
        typer.Option(
            "--keep-last", metavar="N", help="With --runs: always keep the N newest trees."
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would go; change nothing.")
    ] = False,
    archive: Annotated[
        bool,
        typer.Option("--archive", help="Clear the sessions' words but keep their shape and facts."),
    ] = False,
    archive_to: Annotated[
        str | None,
        typer.Option(
            "--archive-to",
            metavar="FILE",
            help="With --runs: copy the pruned rows into this SQLite store file first.",
        ),
    ] = None,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
    schema: SchemaOpt = None,
) -> None:
    """Delete (or --archive) every session created before DATE, with its turns, runs and
    every row of theirs; with --runs, every run tree started before DATE whose runs all
    finished. Anything still in use (running, paused, leased, awaiting a decision) is kept."""
    db = in_schema(db, schema)
    cutoff = cutoff_of(before, older_than)
    if runs:
        if archive:
            raise CliError(
                EXIT_USAGE, "--archive clears sessions; with --runs use --archive-to FILE"
            )
        prune_runs_command(db, cutoff, status, keep_last, dry_run, archive_to, yes, as_json)
        return
    if status or keep_last is not None or archive_to is not None:
        raise CliError(EXIT_USAGE, "--status, --keep-last and --archive-to go with --runs")
    prune_sessions_command(db, cutoff, dry_run, archive, yes, as_json)


def prune_sessions_command(
    db: str, cutoff: Cutoff, dry_run: bool, archive: bool, yes: bool, as_json: bool
) -> None:
    """Sessions, one transaction each, each decided again under its lock. The sessions'
    `created_at` are upstream's stamps, so the cutoff's stamp compares with them as an instant."""
    before = cutoff.stamp
    totals = {"sessions": 0, "turns": 0, "runs": 0, "rows": 0, "bytes": 0}
    verb = "archive" if archive else "delete"
    with open_writer(db) as store:
        doomed, refused = store.sweep_candidates(before)
        if archive:
            cleared = [store.archive_session(s, dry_run=True) for s in doomed]
            sizes = [store.session_size(s) for s in doomed]
            would = {
                "sessions": len(doomed),
                "turns": sum(a.turns for a in cleared),
                "runs": sum(s.runs for s in sizes if s),
                "rows": sum(a.rows for a in cleared),
                "bytes": sum(a.bytes for a in cleared),
            }
        else:
            forecast = [store.sweep_session(s, before, dry_run=True) for s in doomed]
            would = {key: sum(getattr(p, key) for p in forecast) for key in totals}
        if dry_run or not doomed:
            report(would, refused, verb, dry_run=True, as_json=as_json)
            return
        confirm(
            f"{verb} {plural(len(doomed), 'session')} ({plural(would['runs'], 'run')}, "
            f"{plural(would['rows'], 'row')}) created before {before}?",
            yes,
        )
        refused = list(refused)
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
                    pruned = store.sweep_session(session, before)
                    refused += pruned.refused
                    for key in ("sessions", "turns", "runs", "rows", "bytes"):
                        totals[key] += getattr(pruned, key)
                if bars is not None and task is not None:
                    bars.update(task, completed=i)
    report(totals, sorted(refused), verb, dry_run=False, as_json=as_json)


def report(
    totals: dict[str, int], refused: list[int], verb: str, *, dry_run: bool, as_json: bool
) -> None:
    from rich.text import Text

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
def compact_command(
    db: DbArg, yes: YesOpt = False, as_json: JsonOpt = False, schema: SchemaOpt = None
) -> None:
    """Give the space freed by deletions back: SQLite a slice at a time, writers waiting for
    a slice, not the file (a store io-harness made is first rewritten whole, once: VACUUM,
    writers waiting meanwhile); PostgreSQL marks dead rows' space reusable (VACUUM)."""
    db = in_schema(db, schema)
    from rich.text import Text

    with open_writer(db) as store:
        before = store.store_size()
        confirm(
            f"compact {human_size(before.file_bytes)} ({human_size(before.free_bytes)} free)?", yes
        )
        if not as_json:
            stderr_console().print(Text("compacting…"))
        try:
            reclaimed = store.compact()
        except Exception as exc:  # SQLite rolls the slice (or the VACUUM) back when the disk fills
            from ..schema.preflight import is_disk_full

            if not (isinstance(exc, DiskFullError) or is_disk_full(exc)):
                raise
            raise DiskFullError(
                f"{parse_target(db).where}: the disk is full, so the compact stopped; the store "
                "keeps every row. Free about the store's size and run the compact again"
            ) from None
        after = store.store_size()
    if as_json:
        emit_json({"reclaimed_bytes": reclaimed, "file_bytes": after.file_bytes})
        return
    stdout_console().print(
        Text(f"reclaimed {human_size(reclaimed)}; the store is {human_size(after.file_bytes)}")
    )


def prune_runs_command(
    db: str,
    cutoff: Cutoff,
    statuses: list[str] | None,
    keep_last: int | None,
    dry_run: bool,
    archive_to: str | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Runs, whole trees, in batches (see `Store.prune_runs`). A dry run opens the store
    read-only, so not a byte of it changes."""
    before = cutoff.instant
    from ..records.runs import FINISHED_STATUSES

    chosen = tuple(statuses or FINISHED_STATUSES)
    wrong = sorted(set(chosen) - set(FINISHED_STATUSES))
    if wrong:
        raise CliError(
            EXIT_USAGE,
            f"--status takes completed or failed (a running or paused run can still resume), "
            f"got {', '.join(wrong)}",
        )
    try:
        if dry_run:
            with open_reader(db) as reader:
                would = reader.store.prune_runs(
                    before=before,
                    statuses=chosen,
                    keep_last=keep_last,
                    dry_run=True,
                    archive=archive_to,
                )
            report_runs(would, cutoff, dry_run=True, archive_to=archive_to, as_json=as_json)
            return
        with open_writer(db) as store:
            pruned = prune_runs_asking(store, before, chosen, keep_last, archive_to, yes, as_json)
    except ArchiveRefusedError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    except Exception as exc:
        # A full disk met before a batch began (opening the store for writing needs room for
        # its side files): `prune_runs` says one met during the batches itself.
        from ..schema.preflight import is_disk_full

        if isinstance(exc, DiskFullError) or not is_disk_full(exc):
            raise
        raise DiskFullError(
            f"{parse_target(db).where}: the disk is full; nothing was pruned: every run is "
            "still in the store. Free some space and run the prune again"
        ) from None
    report_runs(pruned, cutoff, dry_run=False, archive_to=archive_to, as_json=as_json)


def prune_runs_asking(
    store: Store,
    before: datetime,
    chosen: tuple[str, ...],
    keep_last: int | None,
    archive_to: str | None,
    yes: bool,
    as_json: bool,
) -> Pruned:
    """The forecast (the archive checked), the question, then the prune with its bar."""
    from ..store.cutoff import Cutoff

    would = store.prune_runs(
        before=before, statuses=chosen, keep_last=keep_last, dry_run=True, archive=archive_to
    )
    if not would.runs:
        return would
    into = f" into {archive_to}" if archive_to else ""
    confirm(
        f"delete {plural(would.runs, 'run')} ({plural(would.rows, 'row')}) started before "
        f"{Cutoff.parse(before)}{into}?",
        yes,
    )
    with progress_bars(stderr_console(), quiet=as_json, label="prune") as bars:
        task = bars.add_task("prune", total=would.runs) if bars else None

        def advance(done: int, total: int) -> None:
            if bars is not None and task is not None:
                bars.update(task, completed=done, total=total)

        return store.prune_runs(
            before=before,
            statuses=chosen,
            keep_last=keep_last,
            archive=archive_to,
            progress=advance,
        )


def report_runs(
    pruned: Pruned, before: Cutoff, *, dry_run: bool, archive_to: str | None, as_json: bool
) -> None:
    from rich.text import Text

    if as_json:
        emit_json(
            {
                "runs": pruned.runs,
                "rows": pruned.rows,
                "bytes": pruned.bytes,
                "tables": pruned.tables,
                "run_ids": pruned.run_ids,
                "refused": pruned.refused,
                "archive": archive_to if pruned.runs else None,
                "dry_run": dry_run,
                "action": "delete",
            }
        )
        return
    done = "would delete" if dry_run else "deleted"
    into = ""
    if archive_to and pruned.runs:
        into = f" ({'to be ' if dry_run else ''}copied to {archive_to} first)"
    stdout_console().print(
        Text(
            f"{done} {plural(pruned.runs, 'run')} started before {before}, "
            f"{plural(pruned.rows, 'row')}, {pruned.bytes:,} characters of text{into}"
        )
    )
    if pruned.tables:
        emit_table(
            [Column("table"), Column("rows", "right")],
            [(name, f"{n:,}") for name, n in sorted(pruned.tables.items())],
        )
    if pruned.refused:
        kept = ", ".join(str(r) for r in pruned.refused)
        stdout_console().print(
            Text(f"kept (a run in use, or a session's): the trees of runs {kept}")
        )
