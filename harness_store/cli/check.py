"""`harness-store check`: is the store whole, and can io-harness resume its runs?

Read-only unless `--repair`: each problem is printed with its table, its rows and what
io-harness does with them; exit code 0 when nothing was found, `EXIT_UNHEALTHY` when something
was (after `--repair`: when something is left). `--repair` fixes only what loses nothing,
after a backup, each fix in a transaction of its own, and prints each fix; what would lose data
is printed with the statement that would remove it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import DamagedStoreError, NotADatabaseError
from .app import EPILOG, DbArg, JsonOpt, SchemaOpt, app
from .decide import open_writer, unchanged_on_full_disk
from .output import emit_json, plural, stdout_console
from .reader import in_schema, open_reader

if TYPE_CHECKING:
    from ..records.health import CheckReport, Finding, Repaired

EXIT_UNHEALTHY = 6
"""`check` found problems (after `--repair`: problems are left)."""


def finding_json(finding: Finding) -> dict[str, object]:
    return {
        "kind": finding.kind.value,
        "table": finding.table,
        "detail": finding.detail,
        "io_harness": finding.upstream,
        "key": finding.key,
        "rows": list(finding.rows),
        "count": finding.count,
        "repair": finding.repair,
        "command": finding.command,
    }


def report_json(report: CheckReport) -> dict[str, object]:
    from ..releases import HEAD

    return {
        "healthy": report.healthy,
        "revision": report.revision,
        "release": report.release,
        "head": HEAD,
        "checks": list(report.checks),
        "findings": [finding_json(f) for f in report.findings],
    }


def below_head(report: CheckReport, db: str) -> str | None:
    """The line saying a store is below the head this package writes, and the command that
    brings it up; None at the head, or when what the store is was not found out."""
    from ..engine import to_url
    from ..releases import HEAD
    from .reader import command_target

    if report.revision == HEAD or not (report.revision or report.release):
        return None
    at = f"revision {report.revision}" if report.revision else f"io-harness {report.release}"
    return (
        f"the store is at {at}, below {HEAD}, the head this package writes: "
        f"`harness-store upgrade {command_target(to_url(db))}` brings it up"
    )


def show(report: CheckReport, db: str) -> None:
    from rich.text import Text

    console = stdout_console()
    for finding in report.findings:
        console.print(Text(f"{finding.kind.value}  {finding.table}: {finding.detail}"))
        console.print(Text(f"    upstream: {finding.upstream}"))
        if finding.repair:
            console.print(Text(f"    --repair: {finding.repair}"))
        elif finding.command:
            console.print(Text(f"    not repaired (it would lose data): {finding.command}"))
    checked = ", ".join(report.checks)
    if report.healthy:
        console.print(Text(f"healthy: nothing found ({checked})"))
    else:
        console.print(Text(f"{plural(len(report.findings), 'problem')} found ({checked})"))
    below = below_head(report, db)
    if below is not None:
        console.print(Text(below))


def read_report(db: str) -> CheckReport:
    """`Store.check` through the read-only open, which refuses what `check` refuses (with or
    without `--repair`); a file too damaged to open is a finding, not an error."""
    from ..records.health import CheckReport
    from ..schema.detect import StoreKind

    try:
        with open_reader(db, require_readable=False) as reader:
            if reader.found.kind is StoreKind.EMPTY:
                raise NotADatabaseError(f"{reader.where} is an empty database, not a run store")
            return reader.store.check()
    except Exception as exc:
        if not damaged(exc):
            raise
        from ..store.check import damaged_finding

        return CheckReport((damaged_finding(exc),), None, None, ("integrity",))


def damaged(exc: BaseException) -> bool:
    """Whether an error is a damaged page of the file (SQLite's code, never its message)."""
    from ..schema.preflight import is_malformed

    return isinstance(exc, DamagedStoreError) or any(
        is_malformed(e) for e in (exc, exc.__cause__) if e is not None
    )


def repair_store(db: str, report: CheckReport) -> Repaired:
    """`Store.repair` when `report` has something it fixes on a store it may write: at the
    head revision, its file whole. Otherwise nothing is opened for writing."""
    from ..records.health import Repaired

    if not any(f.repairable for f in report.findings) or why_not(report) != NOTHING_SAFE:
        return Repaired((), None, report)
    with unchanged_on_full_disk(db, "nothing was repaired"), open_writer(db) as store:
        return store.repair()


NOTHING_SAFE = "nothing found could be fixed safely"


def why_not(report: CheckReport) -> str:
    """Why `--repair` fixed nothing."""
    from ..records.health import FindingKind
    from ..releases import HEAD

    if report.of(FindingKind.INTEGRITY):
        return "the file is damaged: recover it first (see the integrity finding)"
    if report.revision != HEAD and any(f.repairable for f in report.findings):
        return (
            f"the store is at {report.revision or 'no revision'}, not {HEAD}: "
            "`harness-store upgrade` it first"
        )
    return NOTHING_SAFE


@app.command("check", epilog=EPILOG)
def check_command(
    db: DbArg,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Fix what loses nothing (indexes, triggers, spend counters, leases of missing "
            "runs), after a backup, each fix in a transaction of its own.",
        ),
    ] = False,
    schema: SchemaOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check the store: the file, the schema against its revision, runs io-harness cannot
    resume, orphans, run trees, leases and spend counters. Exit code 6 when a problem is found.
    Read-only unless --repair."""
    from rich.text import Text

    db = in_schema(db, schema)
    report = read_report(db)
    if repair:
        repaired = repair_store(db, report)
        report = repaired.after
        if as_json:
            emit_json(
                {
                    **report_json(report),
                    "repaired": list(repaired.done),
                    "backup": str(repaired.backup) if repaired.backup else None,
                }
            )
        else:
            console = stdout_console()
            if repaired.backup:
                console.print(Text(f"backup: {repaired.backup}"))
            for line in repaired.done:
                console.print(Text(f"repaired: {line}"))
            if not repaired.done:
                console.print(Text(f"repaired: nothing ({why_not(report)})"))
            show(report, db)
    elif as_json:
        emit_json(report_json(report))
    else:
        show(report, db)
    if not report.healthy:
        raise typer.Exit(EXIT_UNHEALTHY)
