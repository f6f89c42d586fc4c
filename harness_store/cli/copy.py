"""`harness-store copy`: a whole store between backends."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from ..transfer import CopyReport
from .app import EPILOG, EXIT_OTHER, CliError, JsonOpt, app
from .output import emit_json, note, progress_bars, stderr_console, stdout_console
from .reader import in_schema, parse_target

# --- copy --------------------------------------------------------------------------------


def load_copy_store() -> Callable[..., CopyReport]:
    """`transfer.copy_store`, imported only when `copy` runs (it is its only user)."""
    try:
        from ..transfer import copy_store
    except ModuleNotFoundError as exc:
        if exc.name != "harness_store.transfer":
            raise
        raise CliError(
            EXIT_OTHER, "copy needs harness_store.transfer, which this installation lacks"
        ) from None
    return copy_store


class StopRequest:
    """The signal that asked the copy to stop, if one has: set by the signal handler, acted on
    by `CopyProgress` at the copy's next batch. A stop raised from the handler itself could
    land anywhere, inside SQLAlchemy's pool or the driver, which would log it as their own
    failure; or after the rows were committed, where emptying the target would discard a
    whole copy."""

    def __init__(self) -> None:
        self.signal_name: str | None = None


class Stopped(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP during a copy, raised at a batch boundary, so the copy
    cleans up as on any failure (the target is emptied again)."""


class CopyProgress:
    """The `progress` callback of `copy_store`: a Rich bar per table on a terminal, one line
    per finished table otherwise (on stderr, so stdout keeps only the result). It is also
    where a requested stop is raised (`StopRequest`)."""

    def __init__(
        self, console: Console, bars: Progress | None, stop: StopRequest, *, quiet: bool
    ) -> None:
        self.console = console
        self.quiet = quiet
        self.bars = bars
        self.stop = stop
        self.tasks: dict[str, TaskID] = {}
        self.finished: set[str] = set()

    def __call__(self, name: str, done: int, total: int) -> None:
        from rich.text import Text

        if self.stop.signal_name is not None:
            raise Stopped(self.stop.signal_name)
        if self.bars is not None:
            if name not in self.tasks:
                self.tasks[name] = self.bars.add_task(name, total=total)
            self.bars.update(self.tasks[name], completed=done, total=total)
        elif not self.quiet and done == total > 0 and name not in self.finished:
            self.finished.add(name)
            self.console.print(Text(f"{name}: {done:,}/{total:,} rows"))


STOP_SIGNALS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}
"""The signals that stop a copy cleanly, and how the message names each."""


@contextmanager
def stop_at_next_batch() -> Iterator[StopRequest]:
    """While the block runs, Ctrl-C, SIGTERM and SIGHUP ask the copy to stop at its next
    batch (a second one stops it at once); a stopped copy becomes one `CliError`. A signal
    the caller ignores stays ignored (`nohup`, a background job's Ctrl-C)."""
    request = StopRequest()

    def stop(signum: int, frame: object) -> None:
        name = STOP_SIGNALS[signal.Signals(signum)]
        if request.signal_name is not None:
            raise Stopped(request.signal_name)  # asked again: do not wait for the batch
        request.signal_name = name

    previous = {
        sig: signal.signal(sig, stop)
        for sig in STOP_SIGNALS
        if signal.getsignal(sig) is not signal.SIG_IGN
    }
    try:
        yield request
    except KeyboardInterrupt as exc:
        name = str(exc) or "Ctrl-C"
        raise CliError(
            EXIT_OTHER, f"copy stopped by {name}; the target was emptied again"
        ) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@app.command("copy", epilog=EPILOG)
def copy_command(
    source: Annotated[str, typer.Argument(metavar="SRC", help="Store to copy from.")],
    target: Annotated[str, typer.Argument(metavar="DST", help="Store to copy into.")],
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, max=1_000_000, metavar="N", help="Rows per batch.")
    ] = 1000,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Redo a copy into a target left unfinished by a killed copy (or one whose "
            "tables hold no rows).",
        ),
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue a killed copy: its rows were never committed, so they are copied "
            "again (the same as --replace).",
        ),
    ] = False,
    skip_unknown: Annotated[
        bool,
        typer.Option(
            "--skip-unknown-tables",
            help="Leave out tables and columns of a newer io-harness (refused otherwise).",
        ),
    ] = False,
    source_schema: Annotated[
        str | None,
        typer.Option(
            "--source-schema",
            metavar="NAME",
            help="PostgreSQL: the schema of its own the source store lives in.",
        ),
    ] = None,
    dest_schema: Annotated[
        str | None,
        typer.Option(
            "--dest-schema",
            metavar="NAME",
            help="PostgreSQL: the schema of its own the copy is made in, beside an "
            "application's tables (created by the copy).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy a whole store between SQLite and PostgreSQL (either way), with every row count
    verified; a progress bar per table on a terminal. Until it commits, the target is marked
    unfinished; a copy stopped by Ctrl-C, SIGTERM or SIGHUP before its commit empties the
    target again, and one killed outright leaves it marked, for --replace."""
    from rich.text import Text

    from ..engine import sqlite_path
    from ..schema.detect import check_sqlite_file

    copy_store = load_copy_store()
    source, target = in_schema(source, source_schema), in_schema(target, dest_schema)
    source_url, target_url = parse_target(source).url, parse_target(target).url
    source_path = sqlite_path(source_url)
    if source_path is not None:
        # a missing file, a FIFO, socket, device or directory: refused before reading
        check_sqlite_file(source_path, writable=False, missing="")
    console = stderr_console()
    with progress_bars(console, quiet=as_json) as bars, stop_at_next_batch() as stop:
        report = copy_store(
            source_url,
            target_url,
            batch_size=batch_size,
            progress=CopyProgress(console, bars, stop, quiet=as_json),
            skip_unknown_tables=skip_unknown,
            replace=replace or resume,
        )
    if stop.signal_name is not None:
        note(
            f"{stop.signal_name} arrived after the last batch; the copy was committed and is whole"
        )
    if as_json:
        emit_json(
            {
                "source": report.source,
                "target": report.target,
                "counts": report.counts,
                "rows": report.rows,
                "skipped_tables": report.skipped_tables,
                "skipped_columns": list(report.skipped_columns),
                "checkpoint_format": report.checkpoint_format,
                "origin": report.origin,
                "seconds": report.seconds,
            }
        )
        return
    console = stdout_console()
    for line in report.describe():
        console.print(Text(line))
