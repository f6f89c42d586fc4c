"""`Store.check` and `Store.repair`: is this store whole, and can io-harness resume its runs?

`check` only reads, in one read transaction: the database's own consistency check (SQLite's
`integrity_check` and `foreign_key_check`), the schema against the stamped revision and the
models, the rows io-harness resumes from (every step number of a checkpointed run has its
checkpoint, every checkpoint its step, no step number missing below a run's last), rows of
runs that do not exist, run trees (missing parents, cycles), leases of missing runs, and hs3's
spend counters against `provider_calls`. Each problem is a `Finding`. The schema checks are
here; the row checks in `health_rows`.

`repair` fixes only what loses nothing — a missing index or trigger is rebuilt, spend
counters are recounted, a lease of a missing run is dropped — after a backup of a SQLite file,
in one transaction. Everything else (orphans, torn steps, a wrong stamp) is left as it is and
reported with the statement that would remove or change it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import Connection, Index, MetaData, exists, func, inspect, select, text

from .. import models as m
from ..dialects import Backend, backend_for
from ..dialects.postgresql import FORMAT_TABLE
from ..engine import sqlite_path
from ..errors import StoreError
from ..models.spend import SPEND_TABLES
from ..records.health import ROWS_SHOWN, CheckReport, Finding, FindingKind, Repaired
from ..schema.backup import take_backup
from ..schema.detect import diagnose, read_revision, read_tables
from ..schema.preflight import is_malformed
from ..schema.releases import (
    HEAD,
    INDEXES,
    OWN_INDEXES,
    OWN_SPEND,
    OWN_STEP_TOKENS,
    REVISIONS,
    SHAPES,
    STORE_RELEASE,
    UPSTREAM_HEAD,
    UpstreamIndex,
    indexes_at,
    own_indexes_at,
    release_of_revision,
)
from .base import StoreBase
from .health_rows import (
    file_findings,
    lease_findings,
    model_table,
    orphan_findings,
    recount_spend,
    resume_findings,
    spend_findings,
    tree_findings,
)
from .health_values import value_findings
from .marks import reads, writes

K = FindingKind

SPEND_TRIGGERS = frozenset({"hs_spend_insert", "hs_spend_delete", "hs_spend_update"})
"""hs3's triggers on `provider_calls`."""

OWN_TABLES = frozenset({FORMAT_TABLE})
"""harness_store's own tables that `detect.read_tables` lists (PostgreSQL's stand-in for
`user_version`)."""

# --- schema -------------------------------------------------------------------------------


def _items(shape: Mapping[str, frozenset[str]]) -> set[str]:
    items: set[str] = set()
    for table, columns in shape.items():
        items.add(table)
        items.update(f"{table}.{c}" for c in columns)
    return items


def _schema_item(item: str, *, missing: bool, release: str) -> Finding:
    table, _, column = item.partition(".")
    if missing:
        kind = K.MISSING_COLUMN if column else K.MISSING_TABLE
        detail = f"{item} is missing; io-harness {release}'s schema has it"
        upstream = (
            "io-harness's next open creates it empty (it adds whatever its release lacks); "
            "Alembic never does, as the stamp says it is there"
        )
        command = None
    else:
        kind = K.UNKNOWN_COLUMN if column else K.UNKNOWN_TABLE
        detail = f"{item} is not in io-harness {UPSTREAM_HEAD}'s schema nor harness_store's"
        upstream = "io-harness never reads or writes it"
        command = f"ALTER TABLE {table} DROP COLUMN {column}" if column else f"DROP TABLE {table}"
    return Finding(kind, table, detail, upstream, key="name", rows=(item,), command=command)


def schema_findings(conn: Connection, revision: str | None) -> tuple[list[Finding], str | None]:
    """The tables, columns, indexes and triggers against the stamped revision (or, untracked,
    the shape's release), and whether the stamp agrees with the shape."""
    tables = read_tables(conn)
    findings: list[Finding] = []
    stamped = revision
    if revision is None:
        found = diagnose(conn, refuse_newer_format=False)
        release = found.torn_of or found.release
        if release is None:
            return findings, None
    elif revision not in REVISIONS:
        findings.append(
            Finding(
                K.STAMP,
                "alembic_version",
                f"alembic_version says {revision!r}, which is no harness_store revision",
                "io-harness ignores alembic_version; harness_store refuses to upgrade it",
                key="version_num",
                rows=(revision,),
                command="alembic -x db=DB stamp REVISION (the revision of the store's shape)",
            )
        )
        return findings, None
    else:
        release = release_of_revision(revision)
    have = _items(tables)
    expected = _items(SHAPES[release])
    known = _items(SHAPES[UPSTREAM_HEAD])
    later = (have & known) - expected
    missing = expected - have
    shape_release = next(
        (r for r in reversed(tuple(SHAPES)) if _items(SHAPES[r]) <= have), None
    )  # the newest release whose whole shape is there
    stamp_wrong = revision is not None and (
        bool(later)
        or (
            bool(missing)
            and shape_release not in (None, release)
            and missing == expected - _items(SHAPES[shape_release])
        )
    )
    indexes = read_indexes(conn, tables)
    present_tables = set(inspect(conn).get_table_names())
    emptied = None  # the revision of the shape of a store whose alembic_version is empty
    if revision is None and "alembic_version" in present_tables:
        at = emptied = shape_revision(release, present_tables, indexes)
        findings.append(
            Finding(
                K.STAMP,
                "alembic_version",
                f"alembic_version is empty; the store's shape is revision {at}'s "
                f"(io-harness {release})",
                "io-harness ignores alembic_version; `harness-store upgrade` and Alembic stop "
                "on a version table without its row",
                key="version_num",
                command=f"alembic -x db=DB stamp {at}",
            )
        )
    if stamp_wrong:
        assert shape_release is not None
        listed = sorted(later or missing)
        revision = shape_revision(shape_release, present_tables, indexes)
        findings.append(
            Finding(
                K.STAMP,
                "alembic_version",
                f"alembic_version says {stamped}, but the store's shape is revision {revision}'s "
                f"(io-harness {shape_release}; {len(listed)} tables and columns "
                f"{'beyond' if later else 'short of'} {release}'s: {', '.join(listed[:6])}"
                f"{' …' if len(listed) > 6 else ''})",
                "io-harness goes by the shape, not the stamp; `harness-store upgrade` trusts the "
                "stamp and would skip or repeat revisions",
                key="version_num",
                rows=(str(stamped),),
                command=f"alembic -x db=DB stamp {revision}",
            )
        )
        release = shape_release
    else:
        findings += [_schema_item(i, missing=True, release=release) for i in sorted(missing)]
    unknown = {i for i in have - known if i.split(".")[0] not in OWN_TABLES}
    unknown_tables = {i for i in unknown if "." not in i}
    findings += [
        _schema_item(i, missing=False, release=release)
        for i in sorted(unknown)
        if i in unknown_tables or i.split(".")[0] not in unknown_tables
    ]
    counted = revision is not None and REVISIONS.index(revision) >= REVISIONS.index(OWN_SPEND)
    if counted:
        findings += [
            Finding(
                K.MISSING_TABLE,
                name,
                f"{name} (hs3's spend counters) is missing",
                "io-harness never reads it; harness_store's spend reads fail without it",
                key="name",
                rows=(name,),
                command="alembic -x db=DB stamp hs2, then harness-store upgrade DB",
            )
            for name in SPEND_TABLES
            if name not in present_tables
        ]
    indexed_as = revision if revision is not None else emptied
    findings += [
        duplicates_finding(conn, f, INDEXES[release]) or f
        for f in index_findings(tables, indexes, release, indexed_as)
    ]
    findings += view_findings(conn)
    if counted:
        findings += trigger_findings(conn, tables)
    return findings, release


def duplicates_finding(
    conn: Connection, finding: Finding, upstream: Mapping[str, UpstreamIndex]
) -> Finding | None:
    """For a missing UNIQUE index whose table holds rows it would refuse: that finding,
    which `repair` leaves (creating the index would fail), with the duplicated keys."""
    name = str(finding.rows[0]) if finding.rows else ""
    index = upstream.get(name)
    if finding.kind is not K.MISSING_INDEX or index is None or not index.unique:
        return None
    table = model_table(index.table)
    columns = [table.c[c] for c in index.columns]
    groups = select(*columns).group_by(*columns).having(func.count() > 1)
    if index.where:
        groups = groups.where(text(index.where))
    found = groups.subquery()
    shown = conn.execute(select(found).limit(ROWS_SHOWN)).all()
    if not shown:
        return None
    count = int(conn.execute(select(func.count()).select_from(found)).scalar_one())
    keys = tuple("/".join(str(v) for v in row) for row in shown)
    return Finding(
        K.DUPLICATE_ROWS,
        index.table,
        f"index {name} on {index.table} is missing, and {count} keys "
        f"({', '.join(index.columns)}) have more than one row, which it would refuse "
        f"({', '.join(keys[:5])}{' …' if count > 5 else ''})",
        "io-harness's next open fails to create the index (a UNIQUE constraint failed), and "
        "its reads of one key return one of the rows at random",
        key="/".join(index.columns),
        rows=keys,
        count=count,
        command=(
            f"DELETE FROM {index.table} WHERE id NOT IN (SELECT MIN(id) FROM {index.table} "
            f"GROUP BY {', '.join(index.columns)}), then harness-store check --repair"
        ),
    )


def view_findings(conn: Connection) -> list[Finding]:
    """Views: io-harness creates none, nor does harness_store."""
    return [
        Finding(
            K.UNKNOWN_VIEW,
            name,
            f"view {name} is neither io-harness's nor harness_store's",
            "io-harness never reads it",
            key="name",
            rows=(name,),
            command=f"DROP VIEW {name}",
        )
        for name in sorted(inspect(conn).get_view_names())
    ]


Indexes = Mapping[str, tuple[str, tuple[str, ...]]]
"""Index name → its table and its columns."""


def read_indexes(conn: Connection, tables: Iterable[str]) -> Indexes:
    """Every named index of the tables (but those behind a UNIQUE constraint): its table and
    columns."""
    inspector = inspect(conn)
    present: dict[str, tuple[str, tuple[str, ...]]] = {}
    for table in tables:
        for index in inspector.get_indexes(table):
            if index.get("duplicates_constraint") or index["name"] is None:
                continue
            columns = tuple(str(c) for c in index["column_names"])
            present[str(index["name"])] = (table, columns)
    return present


def shape_revision(release: str, tables: set[str], indexes: Indexes) -> str:
    """The revision a store of `release`'s shape is at, told by harness_store's own objects:
    every `hs_` index of the head, hs3's counters, hs2's index of steps, hs1's index of
    trees."""
    if release == UPSTREAM_HEAD:
        if set(SPEND_TABLES) <= tables:
            return HEAD if set(own_indexes_at(HEAD)) <= set(indexes) else OWN_SPEND
        if set(own_indexes_at(OWN_STEP_TOKENS)) & set(indexes):
            return OWN_STEP_TOKENS
    if release == STORE_RELEASE and "hs_runs_parent_run_id" in indexes:
        return OWN_INDEXES
    return release


def index_findings(
    tables: Mapping[str, frozenset[str]],
    present: Indexes,
    release: str,
    revision: str | None,
) -> list[Finding]:
    """The indexes against the revision's shape (`indexes_at`: upstream's of its release and
    harness_store's `hs_` ones), or for a store Alembic never saw, its release's: each missing
    one, each on another table or columns, each the shape does not have."""
    wanted = indexes_at(revision) if revision is not None else INDEXES[release]
    shape = f"revision {revision}" if revision is not None else f"io-harness {release}"
    findings = []
    for name, index in sorted(wanted.items()):
        table, columns = index.table, index.columns
        if name in present and present[name] != (table, columns):
            findings.append(
                Finding(
                    K.INDEX_DIFFERS,
                    table,
                    f"index {name} is on {present[name][0]} ({', '.join(present[name][1])}), "
                    f"not on {table} ({', '.join(columns)}) as {shape}'s schema has it",
                    "io-harness's reads that name the index (INDEXED BY) or rely on its "
                    "order scan or sort instead of seeking; its next open keeps it as it is",
                    key="name",
                    rows=(name,),
                    repair=f"drop index {name} and create it as {shape}'s schema has it",
                )
            )
        if name in present or table not in tables:
            continue
        findings.append(
            Finding(
                K.MISSING_INDEX,
                table,
                f"index {name} on {table} is missing; {shape}'s schema has it",
                "io-harness reads and writes the table all the same, scanning it where the index "
                "would seek" + ("" if name.startswith("hs_") else "; its next open recreates it"),
                key="name",
                rows=(name,),
                repair=f"create index {name}",
            )
        )
    for name, (table, _) in sorted(present.items()):
        if name in wanted:
            continue
        known = _index_facts(name) is not None
        findings.append(
            Finding(
                K.UNKNOWN_INDEX,
                table,
                f"index {name} on {table} is not in {shape}'s schema"
                + ("" if known else ", nor io-harness's nor harness_store's at any revision"),
                "io-harness ignores it (SQLite may use it in its plans)",
                key="name",
                rows=(name,),
                command=f"DROP INDEX {name}",
            )
        )
    return findings


def _index_facts(name: str) -> UpstreamIndex | None:
    """What an index of that name is (table, columns, …) at any revision it exists at."""
    for revision in reversed(REVISIONS):
        found = indexes_at(revision).get(name)
        if found is not None:
            return found
    return None


def build_index(name: str) -> Index:
    """The index of that name as the schema has it: the models' at head, else one built from
    the facts (on a copy of the table, so the models are left as they are)."""
    for table in m.Base.metadata.tables.values():
        for index in table.indexes:
            if index.name == name:
                return index
    facts = _index_facts(name)
    assert facts is not None
    table = model_table(facts.table).to_metadata(MetaData())
    where = {"sqlite_where": text(facts.where), "postgresql_where": text(facts.where)}
    return Index(
        name,
        *(table.c[c] for c in facts.columns),
        unique=facts.unique,
        **(where if facts.where else {}),
    )


def trigger_findings(conn: Connection, tables: Mapping[str, frozenset[str]]) -> list[Finding]:
    backend = _backend(conn)
    findings = []
    on_calls = backend.trigger_names(conn, "provider_calls") if "provider_calls" in tables else None
    if on_calls is not None:
        findings += [
            Finding(
                K.MISSING_TRIGGER,
                "provider_calls",
                f"trigger {name} (hs3's spend counters) is missing",
                "io-harness writes its calls all the same; harness_store's spend answers kept "
                "for their groups are no longer invalidated by those writes",
                key="name",
                rows=(name,),
                repair=f"create trigger {name}, then recount the spend counters",
            )
            for name in sorted(SPEND_TRIGGERS - on_calls)
        ]
    for table in sorted(tables):
        names = backend.trigger_names(conn, table)
        unknown = names - SPEND_TRIGGERS if table == "provider_calls" else names
        findings += [
            Finding(
                K.UNKNOWN_TRIGGER,
                table,
                f"trigger {name} on {table} is neither io-harness's nor harness_store's",
                "it runs on every write io-harness makes to the table",
                key="name",
                rows=(name,),
                command=f"DROP TRIGGER {name}"
                + (f" ON {table}" if backend.name != "sqlite" else ""),
            )
            for name in sorted(unknown)
        ]
    return findings


def _backend(conn: Connection) -> Backend:
    return backend_for(conn)


# --- the mixin ----------------------------------------------------------------------------


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
    detail = str(getattr(exc, "orig", None) or exc).splitlines()[0]
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
        runs = model_table("runs")
        run_ids = frozenset(int(r) for r in conn.execute(select(runs.c.id)).scalars())
        if {"steps", "checkpoint_events"} <= tables.keys():
            findings += resume_findings(conn, backend, run_ids)
            checks.append("resume")
        findings += orphan_findings(conn, backend, tables)
        checks.append("orphans")
        if "parent_run_id" in tables["runs"]:
            findings += tree_findings(conn, backend, run_ids)
            checks.append("trees")
        if "run_leases" in tables:
            findings += lease_findings(conn)
            checks.append("leases")
    present = set(inspect(conn).get_table_names())
    if "provider_calls" in tables and set(SPEND_TABLES) <= present:
        findings += spend_findings(conn)
        checks.append("spend")


def file_damage(store: StoreBase) -> list[str]:
    """What the database's own check of its pages says is wrong (SQLite's `integrity_check`;
    nothing on PostgreSQL): for a reader whose answer may hide damage, as an empty listing
    of a table whose pages read as empty does."""
    with store._read() as conn:
        return store._backend.integrity_problems(conn)


class HealthMixin(StoreBase):
    """`check` and `repair` (see the module docstring)."""

    @reads
    def check(self) -> CheckReport:
        """Look the whole store over, in one snapshot (every statement sees the same moment,
        `REPEATABLE READ` on PostgreSQL, so live writers cause no false finding), and say what
        is wrong with it; changes nothing. `CheckReport.healthy` when nothing was found.
        Inside a `transaction()` block it reads in that block."""
        if self._connector.in_block():  # inside a transaction() block: read in it
            with self._read() as conn:
                return check_store(conn, self._backend)
        while True:
            with self._translated(), self._connector.snapshot() as conn:
                report = check_store(conn, self._backend)
                if not self._backend.still_read_outdated(conn):
                    return report
            # a writer opened the still file meanwhile: read again, seeing it

    @writes
    def repair(self) -> Repaired:
        """Fix what `check` finds that can be fixed without losing a row: rebuild missing
        indexes and triggers, recount spend counters, drop leases of missing runs. A SQLite
        file is backed up first; the fixes are one transaction. What would lose data is
        left as it is (`Repaired.after` still names it)."""
        report = self.check()
        fixable = [f for f in report.findings if f.repairable]
        if not fixable or report.of(K.INTEGRITY):
            return Repaired((), None, report)  # a damaged file is never written to
        path = sqlite_path(self.url)
        backup = take_backup(path, f"{report.revision or 'base'}-repair") if path else None
        try:
            done = self._repair(fixable)
        except StoreError as exc:
            if backup is not None:  # rolled back: the store is as it was, and so is the copy
                exc.args = (
                    f"{exc} (the repair was rolled back; the backup taken before it is "
                    f"{backup}, which you may delete)",
                )
            raise
        return Repaired(tuple(done), backup, self.check())

    def _repair(self, fixable: list[Finding]) -> list[str]:
        done: list[str] = []
        recount = False
        with self.transaction(), self._write() as conn:
            for finding in fixable:
                if finding.kind in (K.MISSING_INDEX, K.INDEX_DIFFERS):
                    index = build_index(str(finding.rows[0]))
                    if finding.kind is K.INDEX_DIFFERS:
                        index.drop(conn)
                    index.create(conn)
                    verb = "created" if finding.kind is K.MISSING_INDEX else "rebuilt"
                    done.append(f"{verb} index {index.name} on {finding.table}")
                elif finding.kind is K.MISSING_TRIGGER:
                    name = str(finding.rows[0])
                    for statement in self._backend.spend_triggers_sql():
                        if "CREATE TRIGGER" not in statement or f" {name} " in statement:
                            conn.exec_driver_sql(statement)
                    done.append(f"created trigger {name} on provider_calls")
                    recount = True
                elif finding.kind is K.LEASE_OF_MISSING_RUN:
                    leases, runs = model_table("run_leases"), model_table("runs")
                    gone = conn.execute(
                        leases.delete().where(~exists().where(runs.c.id == leases.c.run_id))
                    ).rowcount
                    done.append(f"deleted {gone} leases of runs that do not exist")
                elif finding.kind is K.SPEND_COUNTER:
                    recount = True
            if recount:
                groups = recount_spend(conn)
                done.append(f"recounted the spend counters of {groups} groups")
        return done
