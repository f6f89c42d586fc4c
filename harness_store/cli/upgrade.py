"""`harness-store upgrade`: detect, back up, migrate."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import DiskFullError, StoreNotFoundError, UpgradeFailedError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

    from ..schema.migrate import UpgradeReport
from .app import (
    EXIT_INTERRUPTED,
    EXIT_NOT_A_STORE,
    EXIT_USAGE,
    CliError,
    DbArg,
    JsonOpt,
    SchemaOpt,
    app,
)
from .output import emit_json, stderr_console, visible
from .reader import look, parse_target, suggest

# --- upgrade -----------------------------------------------------------------------------


def chain_revision(to: str, *, head: bool) -> str:
    """The chain revision `--to` names (an io-harness release or a revision; `head` too when
    `head` is allowed); anything else is a usage error."""
    from ..releases import HEAD, NEWEST_KNOWN_RELEASE, REVISIONS, revision_for

    try:
        destination = HEAD if head and to in ("head", "heads") else revision_for(to)
    except KeyError as exc:
        raise CliError(EXIT_USAGE, str(exc.args[0])) from None
    if destination not in REVISIONS:
        raise CliError(
            EXIT_USAGE,
            f"unknown revision {to!r}; choose an io-harness release name (0.1 … "
            f"{NEWEST_KNOWN_RELEASE}) or one of {', '.join(REVISIONS)}",
        )
    return destination


@app.command("upgrade")
def upgrade_command(
    db: DbArg,
    to: Annotated[
        str,
        typer.Option(
            "--to",
            metavar="REV",
            help="Target: an io-harness release (0.40 means 0.37, the newest revision at or "
            "below it) or a revision.",
        ),
    ] = "head",
    no_backup: Annotated[
        bool, typer.Option("--no-backup", help="Skip the backup copy of a SQLite file.")
    ] = False,
    schema: SchemaOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Say what the store is, back it up (SQLite files), and upgrade it through the Alembic
    chain to REV (head by default), in one transaction; report what changed. A path where no
    store exists gets a new one."""
    from ..engine import sqlite_path, where
    from ..releases import REVISIONS
    from ..schema.migrate import upgrade
    from ..schema.preflight import is_disk_full, unfinished_transaction

    destination = chain_revision(to, head=True)
    url = parse_target(db, schema=schema).url
    path = sqlite_path(url)
    say = (lambda line: None) if as_json else stdout_line
    created = path is not None and not path.exists()
    before: str | None = None
    if path is not None and not path.exists():
        if not path.parent.is_dir():
            raise StoreNotFoundError(f"cannot create a store at {path}: no directory {path.parent}")
        say(f"found: no store at {path}; creating one at {destination}")
    elif path is not None and unfinished_transaction(path):
        say(
            f"found: {path} has an unfinished transaction (a rollback journal left by a crash); "
            "the upgrade rolls it back first"
        )
    else:
        found = look(db, schema=schema)
        if found.revision is not None and REVISIONS.index(found.revision) > REVISIONS.index(
            destination
        ):
            raise CliError(
                EXIT_USAGE,
                f"{where(url)} is at {found.revision}, above --to {destination}; upgrade never "
                f"goes down: run {suggest('downgrade', url, options=f'--to {destination}')} "
                "to take it down (nothing was changed)",
            )
        say(f"found: {found.describe()}")
        before = found.revision
    status = stderr_console()
    busy = (
        status.status(f"upgrading {where(url)} …") if status.is_terminal and not as_json else None
    )
    with busy or nullcontext(), told_if_interrupted("upgrade", db, before, schema):
        try:
            report = upgrade(url, destination, backup=not no_backup, create=True)
        except UpgradeFailedError as exc:
            if not created or path is None or not exc.unchanged or not is_disk_full(exc):
                raise
            raise DiskFullError(no_store_left(path)) from None
    tell(report, url, as_json=as_json, created=created, no_backup=no_backup, verb="upgraded")


def no_store_left(path: Path) -> str:
    """Remove what a failed creation of a store left at `path` (an empty file, a journal;
    the chain rolled back, so nothing of a store is in them) and say so."""
    from ..dialects.read_only_files import JOURNAL_SUFFIX, SIDE_SUFFIXES, beside

    for file in [path, *(beside(path, side) for side in (*SIDE_SUFFIXES, JOURNAL_SUFFIX))]:
        file.unlink(missing_ok=True)
    return (
        f"{path}: the disk is full; no store was created and no file was left there. Free "
        "some space and run it again"
    )


def tell(
    report: UpgradeReport, url: URL, *, as_json: bool, created: bool, no_backup: bool, verb: str
) -> None:
    """Say what an upgrade or downgrade found and did, and where its backup is."""
    from ..engine import safe_url, where

    say = (lambda line: None) if as_json else stdout_line
    raced = bool(getattr(report, "raced", False))
    changed = not raced and (report.before != report.after or report.stamped is not None)
    if as_json:
        emit_json(
            {
                "store": safe_url(url),
                "found": report.found.describe() if report.found else None,
                "before": report.before,
                "after": report.after,
                "stamped": report.stamped,
                "backup": str(report.backup) if report.backup else None,
                "changed": changed,
                "nothing_to_do": not changed,
                "raced": raced,
                "messages": report.messages,
            }
        )
        return
    for message in report.messages:
        if not message.startswith("found:"):
            say(message)
    if raced:
        say(
            f"{where(url)}: nothing to do — another process brought it to {report.after} while "
            "this one waited; nothing changed"
        )
    elif not changed:
        say(f"{where(url)}: nothing to do — already at {report.after}; nothing changed")
    else:
        say(f"{verb} {where(url)}: {report.before or 'empty'} → {report.after}")
    if report.backup is None and created:
        say("backup: none (a new store)")
    elif report.backup is None:
        say(f"backup: {no_backup_reason(report, url, skipped=no_backup, changed=changed)}")


@app.command("downgrade")
def downgrade_command(
    db: DbArg,
    to: Annotated[
        str,
        typer.Option(
            "--to",
            metavar="REV",
            help="Target: an io-harness release (0.40 means 0.37) or a revision; required.",
        ),
    ],
    no_backup: Annotated[
        bool, typer.Option("--no-backup", help="Skip the backup copy of a SQLite file.")
    ] = False,
    schema: SchemaOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Say what the store is, back it up (SQLite files), and take it down the Alembic chain
    to REV, in one transaction; report what changed. The data of the releases above REV is
    dropped (the backup keeps it)."""
    from ..engine import sqlite_path, where
    from ..releases import REVISIONS
    from ..schema.detect import StoreKind
    from ..schema.migrate import downgrade

    destination = chain_revision(to, head=False)
    url = parse_target(db, schema=schema).url
    path = sqlite_path(url)
    if path is not None and not path.exists():
        raise StoreNotFoundError(f"no run store at {path} (nothing to downgrade)")
    found = look(db, schema=schema)
    if found.revision is None or found.kind is StoreKind.EMPTY:
        raise CliError(EXIT_NOT_A_STORE, f"{where(url)}: {found.describe()}; nothing to downgrade")
    if found.revision not in REVISIONS:
        raise CliError(EXIT_USAGE, f"{where(url)} is at {found.revision}, unknown to this package")
    if REVISIONS.index(found.revision) < REVISIONS.index(destination):
        raise CliError(
            EXIT_USAGE,
            f"{where(url)} is at {found.revision}, below --to {destination}; downgrade never "
            f"goes up: run {suggest('upgrade', url, options=f'--to {destination}')} to bring it up "
            "(nothing was changed)",
        )
    if not as_json:
        stdout_line(f"found: {found.describe()}")
    status = stderr_console()
    busy = (
        status.status(f"downgrading {where(url)} …") if status.is_terminal and not as_json else None
    )
    with busy or nullcontext(), told_if_interrupted("downgrade", db, found.revision, schema):
        report = downgrade(url, destination, backup=not no_backup)
    tell(report, url, as_json=as_json, created=False, no_backup=no_backup, verb="downgraded")


@contextmanager
def told_if_interrupted(
    verb: str, db: str, before: str | None, schema: str | None = None
) -> Iterator[None]:
    """Ctrl-C during the chain: the transaction rolled back (and a backup taken for it was
    removed), so the store is as it was. Say where it is, found by looking again, in one line
    on stderr, and end with exit 130 as any interrupted command does."""
    try:
        yield
    except KeyboardInterrupt:
        sys.stderr.write(
            f"harness-store: interrupted: {visible(after_interrupt(verb, db, before, schema))}\n"
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None


def after_interrupt(verb: str, db: str, before: str | None, schema: str | None = None) -> str:
    """Where an interrupted upgrade or downgrade left the store, looked at again."""
    from ..engine import where

    url = parse_target(db, schema=schema).url
    try:
        now = look(db, schema=schema).revision
    except Exception:  # locked, gone: the person can look themselves
        return f"look at {where(url)} with {suggest('inspect', url)} to see where it is"
    if before is not None and now == before:
        return f"the {verb} was rolled back; {where(url)} is unchanged, still at {before}"
    return f"{where(url)} is at {now or 'no revision'}"


def stdout_line(line: str) -> None:
    """One line of the upgrade's account, written at once (it comes before the work)."""
    sys.stdout.write(visible(line) + "\n")
    sys.stdout.flush()


def no_backup_reason(report: UpgradeReport, url: URL, *, skipped: bool, changed: bool) -> str:
    """Why an upgrade left no backup, in words."""
    from ..engine import sqlite_path
    from ..schema.detect import StoreKind

    if report.found is not None and report.found.kind is StoreKind.EMPTY:
        return "none (the database was empty)"
    if not changed:
        return "none (nothing changed)"
    if skipped:
        return "none (--no-backup)"
    if sqlite_path(url) is None:
        return "none (back up a PostgreSQL database yourself, e.g. with pg_dump)"
    return "none"
