"""`Store.check` and `Store.repair`: is this store whole, and can io-harness resume its runs?

`check` only reads, in one snapshot (`Connector.snapshot`: `REPEATABLE READ` on PostgreSQL,
so live writers cause no false finding): the database's own consistency check (SQLite's
`integrity_check` and `foreign_key_check`; a damaged page that stops any later read is a
finding too), the schema against the stamped revision's shape (`check_schema`), values of the
wrong type or form (`check_values`), the rows io-harness resumes from (every step number of a
checkpointed run has its checkpoint, every checkpoint its step, no step number missing below a
run's last), rows of runs that do not exist, run trees (missing parents, cycles), leases of
missing runs (`check_rows`), and hs3's spend counters against `provider_calls`
(`check_spend`). Each problem is a `Finding`. Memory and time are bounded whatever the values:
sets are never built of numbers a value spans (gaps are ranges found in SQL).

`repair` fixes only what loses nothing — a missing index or trigger is rebuilt, spend
counters are recounted, a lease of a missing run is dropped — after a backup of a SQLite file,
each fix its own write transaction and the recount in slices of groups decided in a read
before them, so a live writer waits one fix or one slice; never on a damaged file. Everything
else (orphans, torn steps, a wrong stamp, duplicates, wrong values) is left as it is and
reported with the statement that would remove or change it.
"""

from __future__ import annotations

import time

from sqlalchemy import Connection, exists, inspect

from ..connector.translation import driver_message
from ..dialects import Backend
from ..engine import sqlite_path
from ..errors import StoreError
from ..models.run_tokens import RUN_TOKENS
from ..models.spend import SPEND_TABLES
from ..records.health import CheckReport, Finding, FindingKind, Repaired
from ..schema.backup import take_backup
from ..schema.detect import read_revision, read_tables
from ..schema.preflight import is_malformed
from .base import StoreBase
from .check_quarantine import QUARANTINE_TABLE, quarantine_findings
from .check_roles import role_findings
from .check_rows import (
    file_findings,
    lease_findings,
    lease_value_findings,
    model_table,
    orphan_findings,
    resume_findings,
    tree_findings,
)
from .check_run_tokens import (
    CALL_TOTALS,
    STEP_TOTALS,
    Totals,
    recount_runs,
    run_token_findings,
    token_recount_work,
)
from .check_schema import build_index, schema_findings
from .check_spend import recount_groups, recount_work, spend_findings
from .check_values import value_findings
from .marks import reads, writes
from .store_space import step_aside

K = FindingKind

RECOUNT_SLICE = 200
"""Spend groups (or runs, of their token totals) a repair recounts per write transaction: a
live writer waits one slice."""


def check_store(conn: Connection, backend: Backend) -> CheckReport:
    """Every check on one connection, inside the caller's read transaction. A damaged page
    that stops a check is a finding (`integrity`), and the checks after it are not run."""
    findings: list[Finding] = []
    checks: list[str] = []
    found: dict[str, str | None] = {"revision": None, "release": None}
    try:
        _run_checks(conn, backend, findings, checks, found)
    except Exception as exc:
        if not is_malformed(exc):
            raise
        if not any(f.kind is K.INTEGRITY for f in findings):
            findings.insert(0, damaged_finding(exc))
    return CheckReport(tuple(findings), found["revision"], found["release"], tuple(checks))


def damaged_finding(exc: BaseException) -> Finding:
    """The finding for a damaged page a read ran into (SQLite's "database disk image is
    malformed"), when `integrity_check` could not say more."""
    detail = driver_message(exc).splitlines()[0]
    return Finding(
        K.INTEGRITY,
        "(file)",
        f"a damaged page stopped the check ({detail}); the checks after it were not run",
        "io-harness's reads of the damaged pages fail with 'database disk image is malformed'",
        count=1,
        command="sqlite3 DB .recover | sqlite3 NEW, from a backup if one is whole",
    )


def _run_checks(
    conn: Connection,
    backend: Backend,
    findings: list[Finding],
    checks: list[str],
    found: dict[str, str | None],
) -> None:
    if backend.name == "sqlite":
        findings += file_findings(conn, backend)
        checks += ["integrity", "foreign_keys"]
    revision = found["revision"] = read_revision(conn)
    schema, found["release"] = schema_findings(conn, revision)
    findings += schema
    checks.append("schema")
    tables = read_tables(conn)
    findings += value_findings(conn, backend, tables)
    checks.append("values")
    if "runs" in tables:
        if {"steps", "checkpoint_events"} <= tables.keys():
            findings += resume_findings(conn, backend)
            checks.append("resume")
        findings += orphan_findings(conn, backend, tables)
        checks.append("orphans")
        if "parent_run_id" in tables["runs"]:
            findings += tree_findings(conn, backend)
            checks.append("trees")
        if "run_leases" in tables:
            findings += lease_findings(conn)
            findings += lease_value_findings(conn, backend)
            checks.append("leases")
    present = set(inspect(conn).get_table_names())
    if "provider_calls" in tables and set(SPEND_TABLES) <= present:
        findings += spend_findings(conn)
        checks.append("spend")
    if "steps" in tables and RUN_TOKENS.name in present:
        findings += run_token_findings(conn)
        checks.append("run_tokens")
    if "provider_calls" in tables and CALL_TOTALS.table.name in present:
        findings += run_token_findings(conn, CALL_TOTALS)
        checks.append("call_tokens")
    if backend.name == "postgresql":
        findings += role_findings(conn, backend)
        checks.append("roles")
    if QUARANTINE_TABLE in present:
        findings += quarantine_findings(conn)
        checks.append("quarantine")


def file_damage(store: StoreBase) -> list[str]:
    """What the database's own check of its pages says is wrong (SQLite's `integrity_check`;
    nothing on PostgreSQL): for a reader whose answer may hide damage, as an empty listing
    of a table whose pages read as empty does."""
    with store._read() as conn:
        return store._backend.integrity_problems(conn)


class CheckMixin(StoreBase):
    """`check` and `repair` (see the module docstring)."""

    @reads
    def check(self) -> CheckReport:
        """Look the whole store over, in one snapshot (every statement sees the same moment,
        `REPEATABLE READ` on PostgreSQL, so live writers cause no false finding), and say what
        is wrong with it; changes nothing. `CheckReport.healthy` when nothing was found.
        Inside a `transaction()` block it reads in that block."""
        if self._in_block():  # inside a transaction() block: read in it
            with self._read() as conn:
                return check_store(conn, self._backend)
        while True:
            with self._snapshot(typed=True) as conn:
                report = check_store(conn, self._backend)
                if not self._backend.still_read_outdated(conn):
                    return report
            # a writer opened the still file meanwhile: read again, seeing it

    @writes
    def repair(self) -> Repaired:
        """Fix what `check` finds that can be fixed without losing a row: rebuild missing
        indexes and triggers, recount spend counters, drop leases of missing runs. A SQLite
        file is backed up first. Each fix is its own write transaction, and the recount is
        decided in a read and written `RECOUNT_SLICE` groups a transaction, so a live writer
        waits for one fix or one slice, never for the store (building an index still reads
        its whole table); a repair stopped between them has made the fixes before and the
        next repair makes the rest. What would lose data is left as it is (`Repaired.after`
        still names it), and a damaged file (an `integrity` finding) is not written to at
        all. A fix that fails rolls its own transaction back and raises its typed error, which
        names the backup taken before the repair."""
        report = self.check()
        fixable = [f for f in report.findings if f.repairable]
        if not fixable or report.of(K.INTEGRITY):
            return Repaired((), None, report)  # a damaged file is never written to
        path = sqlite_path(self.url)
        backup = take_backup(path, f"{report.revision or 'base'}-repair") if path else None
        try:
            done = self._repair(fixable)
        except StoreError as exc:
            if backup is not None:  # that fix rolled back; the copy is as the store was before
                exc.args = (
                    f"{exc} (that fix was rolled back, any before it kept; the backup taken "
                    f"before it is {backup}, which you may delete)",
                )
            raise
        return Repaired(tuple(done), backup, self.check())

    def _repair(self, fixable: list[Finding]) -> list[str]:
        done: list[str] = []
        recount = False
        recount_tokens: set[Totals] = set()
        for finding in fixable:
            if finding.kind in (K.MISSING_INDEX, K.INDEX_DIFFERS):
                index = build_index(str(finding.rows[0]))
                with self._write() as conn:  # the one fix that reads a whole table
                    if finding.kind is K.INDEX_DIFFERS:
                        index.drop(conn)
                    index.create(conn)
                verb = "created" if finding.kind is K.MISSING_INDEX else "rebuilt"
                done.append(f"{verb} index {index.name} on {finding.table}")
            elif finding.kind in (K.MISSING_TRIGGER, K.TRIGGER_DIFFERS):
                name = str(finding.rows[0])
                backend = self._backend
                calls = name.startswith("hs_run_call_tokens_")
                tokens = calls or name.startswith("hs_run_tokens_")
                sql = (
                    backend.call_tokens_triggers_sql()
                    if calls
                    else backend.run_tokens_triggers_sql()
                    if tokens
                    else backend.spend_triggers_sql()
                )
                with self._write() as conn:
                    if finding.kind is K.TRIGGER_DIFFERS:
                        on = "" if backend.one_connection else f" ON {finding.table}"
                        conn.exec_driver_sql(f"DROP TRIGGER {name}{on}")
                    for statement in sql:
                        if "CREATE TRIGGER" not in statement or f" {name} " in statement:
                            conn.exec_driver_sql(statement)
                    backend.keep_rules(conn)  # functions made again run as the owner again
                verb = "created" if finding.kind is K.MISSING_TRIGGER else "rebuilt"
                done.append(f"{verb} trigger {name} on {finding.table}")
                if tokens:
                    recount_tokens.add(CALL_TOTALS if calls else STEP_TOTALS)
                else:
                    recount = True
            elif finding.kind is K.MISSING_TABLE:  # hs6's or hs7's totals (the one kind fixed)
                totals = CALL_TOTALS if finding.table == CALL_TOTALS.table.name else STEP_TOTALS
                with self._write() as conn:
                    totals.table.create(conn)
                    self._backend.keep_rules(conn)  # a centre with roles: its grants on it
                done.append(f"created table {finding.table}")
                recount_tokens.add(totals)
            elif finding.kind is K.LEASE_OF_MISSING_RUN:
                leases, runs = model_table("run_leases"), model_table("runs")
                with self._write() as conn:
                    gone = conn.execute(
                        leases.delete().where(~exists().where(runs.c.id == leases.c.run_id))
                    ).rowcount
                done.append(f"deleted {gone} leases of runs that do not exist")
            elif finding.kind is K.SPEND_COUNTER:
                recount = True
            elif finding.kind is K.RUN_TOKENS:
                is_calls = finding.table == CALL_TOTALS.table.name
                recount_tokens.add(CALL_TOTALS if is_calls else STEP_TOTALS)
        if recount:
            with self._snapshot(typed=True) as conn:
                groups = recount_work(conn)
            began = time.monotonic()
            for start in range(0, len(groups), RECOUNT_SLICE):
                if start:
                    step_aside(began)
                    began = time.monotonic()
                with self._write() as conn:
                    recount_groups(conn, groups[start : start + RECOUNT_SLICE])
            done.append(f"recounted the spend counters of {len(groups)} groups")
        for totals in (STEP_TOTALS, CALL_TOTALS):
            if totals in recount_tokens:
                done.append(self._recount_run_tokens(totals))
        return done

    def _recount_run_tokens(self, totals: Totals) -> str:
        """hs6's totals (or hs7's) recounted where they are wrong: the runs decided in a read,
        then written `RECOUNT_SLICE` runs a write transaction."""
        with self._snapshot(typed=True) as conn:
            runs = token_recount_work(conn, totals)
        began = time.monotonic()
        for start in range(0, len(runs), RECOUNT_SLICE):
            if start:
                step_aside(began)
                began = time.monotonic()
            with self._write() as conn:
                recount_runs(conn, runs[start : start + RECOUNT_SLICE], totals)
        of = "" if totals is STEP_TOTALS else f" of {totals.rows}"
        plural = "s" if len(runs) != 1 else ""
        return f"recounted the token totals{of} of {len(runs)} run{plural}"
