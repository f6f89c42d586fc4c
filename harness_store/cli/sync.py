"""`harness-store sync`: merge many io-harness stores into one, incrementally, and
`harness-store origins`: the stores a central store was synced from."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import Progress, TaskID
from rich.text import Text

from .app import EPILOG, DbArg, JsonOpt, app
from .output import (
    Column,
    emit_json,
    emit_table,
    note,
    progress_bars,
    stderr_console,
    stdout_console,
)
from .reader import parse_target

if TYPE_CHECKING:
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
            }
            for o in report.origins
        ],
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
    as_json: JsonOpt = False,
) -> None:
    """Merge io-harness SQLite stores into one store (PostgreSQL or SQLite), sending only what
    changed since each store's last sync: new rows, rows updated in place, deletions. Ids are
    remapped per origin; each store is read as one snapshot and written in one transaction,
    so a sync stopped at any point is completed by the next."""
    from ..sync import sync

    if len(stores) < 2:
        raise typer.BadParameter(
            "give at least one source and the destination", param_hint="SRC... DST"
        )
    *sources, dest = [parse_target(store) for store in stores]
    with progress_bars(
        stderr_console(), quiet=as_json, label="stores", extra="{task.fields[rows]}"
    ) as bars:
        report = sync(sources, dest, mark=mark, dry_run=dry_run, progress=SyncProgress(bars))
    if as_json:
        emit_json(_report_json(report))
        return
    console = stdout_console()
    for line in report.describe():
        console.print(Text(line))


@app.command("origins", epilog=EPILOG)
def origins_command(db: DbArg, as_json: JsonOpt = False) -> None:
    """The stores synced into a central store: origin UUID, host, path, runs, last sync."""
    from ..sync import list_origins

    found = list_origins(parse_target(db))
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
