"""`harness-store export parquet`: a store as a Parquet dataset, one directory per table,
brought up to date incrementally and replaced atomically (`harness_store.analytics.dataset`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ...errors import InvalidValueError
from .. import app
from ..app import EPILOG, EXIT_USAGE, CliError, DbArg, JsonOpt, SchemaOpt, missing_extra
from ..output import emit_json, plural, progress_bars, stderr_console, stdout_console
from ..reader import in_schema, open_reader
from . import export_app

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


class ExportProgress:
    """The `progress` callback of the export: one bar over the tables on a terminal, with
    the rows written of the current one; nothing when piped."""

    def __init__(self, bars: Progress | None) -> None:
        self.bars = bars
        self.task: TaskID | None = None

    def __call__(self, table: str, done: int, total: int, rows: int) -> None:
        if self.bars is None:
            return
        if self.task is None:
            self.task = self.bars.add_task("tables", total=total, rows="")
        shown = f"{table}: {plural(rows, 'row')}" if table else ""
        self.bars.update(self.task, completed=done, rows=shown)


def _names(values: list[str] | None) -> list[str] | None:
    """Repeated and comma-separated values, flattened."""
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _run_ids(values: list[str] | None) -> list[int] | None:
    names = _names(values)
    if names is None:
        return None
    try:
        return [int(name) for name in names]
    except ValueError:
        raise CliError(EXIT_USAGE, f"--runs takes run ids (integers), got {values}") from None


@export_app.command("parquet", epilog=EPILOG)
def parquet_command(
    db: DbArg,
    directory: Annotated[
        Path, typer.Argument(metavar="DIR", help="The dataset directory (created if absent).")
    ],
    tables: Annotated[
        list[str] | None,
        typer.Option(
            "--tables",
            metavar="TABLE[,TABLE…]",
            help="Only these tables (repeat or separate with commas); all by default.",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="TIME",
            help="Only rows stamped at or after TIME (2026-08-01, that day's start, or "
            "2026-08-01T14:00:00Z; UTC when no offset is given); a table without a stamp "
            "keeps the rows of runs started from then on.",
        ),
    ] = None,
    runs: Annotated[
        list[str] | None,
        typer.Option(
            "--runs", metavar="ID[,ID…]", help="Only the rows of these runs (repeat or commas)."
        ),
    ] = None,
    as_json: JsonOpt = False,
    schema: SchemaOpt = None,
) -> None:
    """Write a store's tables as a Parquet dataset: DIR/<table>/*.parquet (every column in
    each file, a synced store's origin too), which pyarrow, pandas, polars and DuckDB open as
    it is, and DIR/_manifest.json listing its files. One export at a time writes DIR (a second
    stops at once). Run it again
    to bring the dataset up to date: only new rows are written, the rows of runs archived
    or pruned since are written again or removed (the dataset holds what the store holds),
    and the tables whose rows change in place are rewritten when they changed. Files are
    written aside and renamed,
    the manifest replaced last, so a stopped export leaves the previous dataset whole.
    Read-only on the store."""
    db = in_schema(db, schema)
    from rich.text import Text

    try:
        from ...analytics.dataset import export_parquet, spare_pandas
    except ImportError as exc:
        raise missing_extra(exc, "exporting Parquet", "analytics") from None
    if app.OWN_PROCESS:
        spare_pandas()  # this process never needs it: some 130 MiB less at the peak
    chosen, run_ids = _names(tables), _run_ids(runs)
    with (
        open_reader(db, replace=False) as reader,
        progress_bars(
            stderr_console(), quiet=as_json, label="tables", extra="{task.fields[rows]}"
        ) as bars,
    ):
        try:
            report = export_parquet(
                reader.store,
                directory,
                tables=chosen,
                since=since,
                runs=run_ids,
                progress=ExportProgress(bars),
            )
        except InvalidValueError as exc:
            raise CliError(EXIT_USAGE, str(exc)) from None
    if as_json:
        emit_json(
            {
                "directory": report.directory,
                "generation": report.generation,
                "rows": report.rows,
                "tables": [vars(t) for t in report.tables],
            }
        )
        return
    console = stdout_console()
    changed = [t for t in report.tables if t.action != "unchanged"]
    for t in changed:
        gone = f", {plural(t.removed, 'row')} of pruned runs removed" if t.removed else ""
        if t.rows or t.removed:
            console.print(
                Text(
                    f"{t.table}: {t.action}, {plural(t.rows, 'row')}{gone} "
                    f"({t.total_rows:,} in all)"
                )
            )
    unchanged = len(report.tables) - len(changed)
    console.print(
        Text(
            f"{plural(report.rows, 'row')} written to {report.directory} "
            f"({plural(len(changed), 'table')} written, {unchanged:,} unchanged)"
        )
    )
