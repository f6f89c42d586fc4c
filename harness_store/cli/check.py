"""`harness-store check`: is the store whole, and can io-harness resume its runs?

Read-only unless `--repair`: each problem is printed with its table, its rows and what
io-harness does with them; exit code 0 when nothing was found, `EXIT_UNHEALTHY` when something
was (after `--repair`: when something is left). `--repair` fixes only what loses nothing,
after a backup, in one transaction, and prints each fix; what would lose data is printed with
the statement that would remove it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import NotADatabaseError
from .app import EPILOG, DbArg, JsonOpt, app
from .decide import open_writer
from .output import emit_json, plural, stdout_console
from .reader import open_reader

if TYPE_CHECKING:
    pass
    from ..records.health import CheckReport, Finding


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
    return {
        "healthy": report.healthy,
        "revision": report.revision,
        "release": report.release,
        "checks": list(report.checks),
        "findings": [finding_json(f) for f in report.findings],
    }


def show(report: CheckReport) -> None:
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


@app.command("check", epilog=EPILOG)
def check_command(
    db: DbArg,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Fix what loses nothing (indexes, triggers, spend counters, leases of missing "
            "runs), after a backup, in one transaction.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check the store: the file, the schema against its revision, runs io-harness cannot
    resume, orphans, run trees, leases and spend counters. Exit code 6 when a problem is found.
    Read-only unless --repair."""
    from rich.text import Text

    from ..schema.detect import StoreKind

    if repair:
        with open_writer(db) as store:
            repaired = store.repair()
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
                console.print(Text("repaired: nothing (nothing found could be fixed safely)"))
            show(report)
    else:
        with open_reader(db, require_readable=False) as reader:
            if reader.found.kind is StoreKind.EMPTY:
                raise NotADatabaseError(f"{reader.where} is an empty database, not a run store")
            report = reader.store.check()
        if as_json:
            emit_json(report_json(report))
        else:
            show(report)
    if not report.healthy:
        raise typer.Exit(EXIT_UNHEALTHY)
