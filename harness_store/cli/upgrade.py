"""`harness-store upgrade`: detect, back up, migrate."""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text
from sqlalchemy.engine import URL

from ..detect import StoreKind
from ..engine import safe_url, sqlite_path, where
from ..releases import HEAD, REVISIONS

if TYPE_CHECKING:
    from ..migrate import UpgradeReport
from .app import EPILOG, EXIT_USAGE, CliError, DbArg, JsonOpt, app
from .output import emit_json, stderr_console, stdout_console
from .reader import open_reader

# --- upgrade -----------------------------------------------------------------------------


@app.command("upgrade", epilog=EPILOG)
def upgrade_command(
    db: DbArg,
    to: Annotated[
        str, typer.Option("--to", metavar="REV", help=f"Target revision: {', '.join(REVISIONS)}.")
    ] = "head",
    no_backup: Annotated[
        bool, typer.Option("--no-backup", help="Skip the backup copy of a SQLite file.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Detect what the store is, back it up (SQLite files), and upgrade it through the Alembic
    chain to REV (head by default), in one transaction; report what changed."""
    from ..migrate import upgrade

    destination = HEAD if to in ("head", "heads") else to
    if destination not in REVISIONS:
        raise CliError(EXIT_USAGE, f"unknown revision {to!r}; choose one of {', '.join(REVISIONS)}")
    with open_reader(db, require_readable=False) as reader:
        found = reader.found
        url = reader.url
    if found.revision is not None and REVISIONS.index(found.revision) > REVISIONS.index(
        destination
    ):
        raise CliError(
            EXIT_USAGE,
            f"{where(url)} is at {found.revision}, above --to {destination}; upgrade never "
            "goes down (nothing was changed)",
        )
    status = stderr_console()
    busy = (
        status.status(f"upgrading {where(url)} …") if status.is_terminal and not as_json else None
    )
    with busy or nullcontext():
        report = upgrade(url, destination, backup=not no_backup, create=False)
    if as_json:
        emit_json(
            {
                "store": safe_url(url),
                "found": report.found.describe() if report.found else None,
                "before": report.before,
                "after": report.after,
                "stamped": report.stamped,
                "backup": str(report.backup) if report.backup else None,
                "changed": report.before != report.after or report.stamped is not None,
                "messages": report.messages,
            }
        )
        return
    console = stdout_console()
    for message in report.messages:
        console.print(Text(message))
    if report.before == report.after and report.stamped is None:
        console.print(Text(f"{where(url)}: already at {report.after}; nothing changed"))
    else:
        console.print(Text(f"upgraded {where(url)}: {report.before or 'empty'} → {report.after}"))
    if report.backup is None:
        console.print(Text(f"backup: {no_backup_reason(report, url, skipped=no_backup)}"))


def no_backup_reason(report: UpgradeReport, url: URL, *, skipped: bool) -> str:
    """Why an upgrade left no backup, in words."""
    if report.found is not None and report.found.kind is StoreKind.EMPTY:
        return "none (the database was empty)"
    if report.before == report.after and report.stamped is None:
        return "none (nothing changed)"
    if skipped:
        return "none (--no-backup)"
    if sqlite_path(url) is None:
        return "none (back up a PostgreSQL database yourself, e.g. with pg_dump)"
    return "none"
