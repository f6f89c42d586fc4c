"""`harness-store sync`: merge many io-harness stores into one, incrementally, and
`harness-store origins`: the stores a central store was synced from."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import SchemaError
from .app import EPILOG, EXIT_NOT_A_STORE, EXIT_OTHER, CliError, DbArg, JsonOpt, app
from .output import (
    Column,
    emit_json,
    emit_table,
    note,
    progress_bars,
    stderr_console,
    stdout_console,
    visible,
)
from .reader import in_schema, open_reader, parse_target

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID
    from sqlalchemy.engine import URL

    from ..sync import SyncReport


class SyncProgress:
    """The `progress` callback of `sync`: one bar over the sources on a terminal (with the
    rows sent from the current one), on stderr; nothing when piped (the report says it all)."""

    def __init__(self, bars: Progress | None) -> None:
        self.bars = bars
        self.task: TaskID | None = None

    def __call__(self, source: str, done: int, total: int, rows: int) -> None:
        if self.bars is not None:
            if self.task is None:
                self.task = self.bars.add_task("stores", total=total, rows="")
            self.bars.update(self.task, completed=done, rows=f"{source}: {rows:,} rows")


def _report_json(report: SyncReport) -> dict[str, object]:
    return {
        "dest": report.dest,
        "dry_run": report.dry_run,
        "dest_setup": report.dest_setup,
        "rows": report.rows,
        "seconds": report.seconds,
        "origins": [
            {
                "source": o.source,
                "origin": o.origin,
                "new_origin": o.new_origin,
                "marked": o.marked,
                "inserted": dict(o.counts.inserted),
                "updated": dict(o.counts.updated),
                "deleted": dict(o.counts.deleted),
                "orphans": dict(o.counts.orphans),
                "seconds": o.seconds,
                "reread": o.reread,
                "warnings": list(o.warnings),
                "quarantined": [q.as_json() for q in o.quarantined],
                "released": list(o.released),
            }
            for o in report.origins
        ],
        "refused": [{"source": r.source, "error": str(r.error)} for r in report.refused],
    }


@app.command("sync", epilog=EPILOG)
def sync_command(
    stores: Annotated[
        list[str],
        typer.Argument(
            metavar="SRC... DST",
            help="SQLite stores to sync from, then the store (file or URL) to sync into.",
        ),
    ],
    mark: Annotated[
        bool,
        typer.Option(
            "--mark",
            help="Write each source's origin UUID into it (once), so it keeps its origin when "
            "copied or moved; otherwise nothing is ever written to a source.",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be sent; write nothing.")
    ] = False,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            help="Keep running: send each source's commits as they come, until SIGTERM or Ctrl-C.",
        ),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="With --follow: print nothing but errors.")
    ] = False,
    dest_schema: Annotated[
        str | None,
        typer.Option(
            "--dest-schema",
            metavar="NAME",
            help="PostgreSQL: the schema of its own the destination store lives in, beside an "
            "application's tables (created by the first sync).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Merge io-harness SQLite stores into one store (PostgreSQL or SQLite), sending only what
    changed since each store's last sync: new rows, rows updated in place, deletions. Ids are
    remapped per origin; each store is read as one snapshot and written with its id maps (in
    one transaction, or into a SQLite centre in slices that keep live writers waiting at most a
    slice), so a sync stopped at any point is completed by the next. With --follow it keeps doing so
    as the sources change: one line per pass that sent something (--json: one JSON object a
    line), and a summary when stopped."""
    if len(stores) < 2:
        raise typer.BadParameter(
            "give at least one source and the destination", param_hint="SRC... DST"
        )
    stores = [*stores[:-1], in_schema(stores[-1], dest_schema)]
    if follow:
        if dry_run:
            raise typer.BadParameter("--dry-run cannot be followed", param_hint="--follow")
        *targets, into = [parse_target(store).url for store in stores]
        follow_sources(targets, into, mark=mark, as_json=as_json, quiet=quiet)
        return
    from rich.text import Text

    from ..sync import SyncRefusedError, sync

    *sources, dest = [parse_target(store).url for store in stores]
    refused: SyncRefusedError | None = None
    with progress_bars(
        stderr_console(), quiet=as_json, label="stores", extra="{task.fields[rows]}"
    ) as bars:
        try:
            report = sync(sources, dest, mark=mark, dry_run=dry_run, progress=SyncProgress(bars))
        except SyncRefusedError as exc:
            refused, report = exc, exc.report
    for origin in report.origins:
        for warning in origin.warnings:
            note(f"warning: {warning}")
    if as_json:
        emit_json(_report_json(report))
    else:
        console = stdout_console()
        for line in report.describe():
            console.print(Text(line))
    if refused is not None:
        not_stores = all(isinstance(r.error, SchemaError) for r in refused.refused)
        raise CliError(
            EXIT_NOT_A_STORE if not_stores else EXIT_OTHER,
            "; ".join(f"{r.source} was not synced: {r.error}" for r in refused.refused),
        )


def follow_sources(
    sources: list[URL], dest: URL, *, mark: bool, as_json: bool, quiet: bool
) -> None:
    """`sync --follow`: `follow` until a stop signal, its passes and notices said as they
    come (text: passes that sent something on stdout, notices on stderr; --json: every
    event a line on stdout), then the summary."""
    import json
    import threading

    from ..sync import FollowNotice, FollowPass, follow
    from ..sync.follow_report import FollowEvent
    from .stop_signals import stopped_by_signals

    stop = threading.Event()

    def said(event: FollowEvent) -> None:
        if quiet:
            return
        if as_json:
            sys.stdout.write(json.dumps(event.as_json(), ensure_ascii=False) + "\n")
            sys.stdout.flush()
        elif isinstance(event, FollowPass):
            if event.rows or event.quarantined or event.released:
                sys.stdout.write(visible(event.describe()) + "\n")
                sys.stdout.flush()
        elif isinstance(event, FollowNotice):
            note(event.describe())

    with stopped_by_signals(stop):
        report = follow(sources, dest, stop=stop, on_event=said, mark=mark)
    if quiet:
        return
    if as_json:
        sys.stdout.write(json.dumps(report.as_json(), ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(visible(report.describe()) + "\n")
    sys.stdout.flush()


@app.command("origins", epilog=EPILOG)
def origins_command(db: DbArg, as_json: JsonOpt = False) -> None:
    """The stores synced into a central store: origin UUID, host, path, runs, last sync."""
    from ..sync import list_origins

    with open_reader(db, require_readable=False) as reader:  # what is no store is refused
        found = list_origins(reader.store)
    if not found and not as_json:
        note("no store was synced into this one")
        return
    if as_json:
        emit_json([o.__dict__ for o in found])
        return
    emit_table(
        [
            Column("origin"),
            Column("host", cut=True),
            Column("path", cut=True),
            Column("runs", "right"),
            Column("syncs", "right"),
            Column("last sync"),
        ],
        [[o.uuid, o.host, o.path, str(o.runs), str(o.syncs), o.synced_at or ""] for o in found],
    )
