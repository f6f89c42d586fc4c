"""`Store.check` and `Store.repair`: is this store whole, and can io-harness resume its runs?

`check` only reads, in one read transaction: the database's own consistency check (SQLite's
`integrity_check` and `foreign_key_check`), the schema against the stamped revision and the
models, the rows io-harness resumes from (every step number of a checkpointed run has its
checkpoint, every checkpoint its step, no step number missing below a run's last), rows of
runs that do not exist, run trees (missing parents, cycles), leases of missing runs, and hs3's
spend counters against `provider_calls`. Each problem is a `Finding`.

`repair` fixes only what loses nothing — a missing index or trigger is rebuilt, spend
counters are recounted, a lease of a missing run is dropped — after a backup of a SQLite file,
in one transaction. Everything else (orphans, torn steps, a wrong stamp) is left as it is and
reported with the statement that would remove or change it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, Index, and_, exists, func, inspect, select

from .. import models as m
from ..backup import take_backup
from ..detect import diagnose, read_revision, read_tables
from ..dialects import Backend, backend_for
from ..dialects.postgresql import FORMAT_TABLE
from ..engine import sqlite_path
from ..models.spend import (
    PRICED_DAYS,
    PRICED_RUNS,
    SPEND_DAYS,
    SPEND_RUNS,
    SPEND_TABLES,
    USAGE_SUMS,
)
from ..records import UNKNOWN_MODEL
from ..records.health import ROWS_SHOWN, CheckReport, Finding, FindingKind, Repaired
from ..releases import (
    INDEXES,
    OWN_INDEXES,
    OWN_SPEND,
    OWN_STEP_TOKENS,
    REVISIONS,
    SHAPES,
    STORE_RELEASE,
    UPSTREAM_HEAD,
    release_of_revision,
)
from .base import StoreBase
from .retention import RUN_TABLES

K = FindingKind

SPEND_TRIGGERS = frozenset({"hs_spend_insert", "hs_spend_delete", "hs_spend_update"})
"""hs3's triggers on `provider_calls`."""

OWN_INDEXES_KNOWN = frozenset(m.HARNESS_INDEXES) | {
    "hs_steps_run_id_step",  # hs1's, replaced by hs2's covering index
    "hs_sandbox_events_run_id",  # hs1's, made redundant by 0.30's
}
"""Every index harness_store ever created. Only those of `required_own_indexes` must be
there: a store stamped at a release after 0.13 never ran hs1, so it never had hs1's."""

OWN_TABLES = frozenset({FORMAT_TABLE})
"""harness_store's own tables that `detect.read_tables` lists (PostgreSQL's stand-in for
`user_version`)."""

STEPS_INDEX = "hs_steps_run_id_step_id_tokens"
CALLS_AT_INDEX = "hs_provider_calls_at"

RESUMED = (
    "io-harness resumes a run after its highest step number (MAX(step)), marking every "
    "step up to it skipped"
)


def required_own_indexes(revision: str) -> frozenset[str]:
    """harness_store's indexes a store at `revision` has whatever path it took there."""
    at = REVISIONS.index(revision)
    needed = set()
    if at >= REVISIONS.index(OWN_STEP_TOKENS):
        needed.add(STEPS_INDEX)
    if at >= REVISIONS.index(OWN_SPEND):
        needed.add(CALLS_AT_INDEX)
    return frozenset(needed)


def _rows(values: Iterable[int | str]) -> tuple[int | str, ...]:
    return tuple(sorted(set(values), key=lambda v: (isinstance(v, str), v)))[:ROWS_SHOWN]


def _ids(values: Iterable[int]) -> str:
    return ", ".join(str(v) for v in sorted(set(values)))


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
    findings += index_findings(tables, indexes, release, revision)
    if counted:
        findings += trigger_findings(conn, tables)
    return findings, release


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
    hs3's counters, hs2's index of steps, hs1's index of trees."""
    if release == UPSTREAM_HEAD:
        if set(SPEND_TABLES) <= tables:
            return OWN_SPEND
        if STEPS_INDEX in indexes:
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
    upstream_all = {name for shape in INDEXES.values() for name in shape}
    wanted = {name: index.table for name, index in INDEXES[release].items()}
    if revision is not None:
        for name in required_own_indexes(revision):
            index = _model_index(name)
            assert index is not None and index.table is not None
            wanted[name] = str(index.table.name)
    findings = []
    for name, table in sorted(wanted.items()):
        model = _model_index(name)
        if name in present and model is not None:
            columns = tuple(str(c.name) for c in model.columns)
            if present[name][1] != columns:
                findings.append(
                    Finding(
                        K.INDEX_DIFFERS,
                        table,
                        f"index {name} is on {table} ({', '.join(present[name][1])}), not on "
                        f"({', '.join(columns)}) as it should be",
                        "io-harness's reads that name the index (INDEXED BY) or rely on its "
                        "order scan or sort instead of seeking; its next open keeps it as it is",
                        key="name",
                        rows=(name,),
                        repair=f"drop index {name} and create it as the models have it",
                    )
                )
        if name in present or table not in tables:
            continue
        can_build = model is not None
        findings.append(
            Finding(
                K.MISSING_INDEX,
                table,
                f"index {name} on {table} is missing",
                "io-harness reads and writes the table all the same, scanning it where the index "
                "would seek" + ("" if name.startswith("hs_") else "; its next open recreates it"),
                key="name",
                rows=(name,),
                repair=f"create index {name}" if can_build else None,
            )
        )
    for name, (table, _) in sorted(present.items()):
        if name in upstream_all or name in OWN_INDEXES_KNOWN:
            continue
        findings.append(
            Finding(
                K.UNKNOWN_INDEX,
                table,
                f"index {name} on {table} is neither io-harness's nor harness_store's",
                "io-harness ignores it (SQLite may use it in its plans)",
                key="name",
                rows=(name,),
                command=f"DROP INDEX {name}",
            )
        )
    return findings


def _model_index(name: str) -> Index | None:
    for table in m.Base.metadata.tables.values():
        for index in table.indexes:
            if index.name == name:
                return index
    return None


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


# --- rows ---------------------------------------------------------------------------------


def _table(name: str) -> Any:
    return m.Base.metadata.tables[name]


def file_findings(conn: Connection, backend: Backend) -> list[Finding]:
    """SQLite's own checks; `foreign_key_check`'s rows of run tables are left to the orphan
    check, which names them per run."""
    findings = []
    problems = backend.integrity_problems(conn)
    if problems:
        findings.append(
            Finding(
                K.INTEGRITY,
                "(file)",
                f"integrity_check: {'; '.join(problems[:5])}"
                + (f" … ({len(problems)} problems)" if len(problems) > 5 else ""),
                "io-harness's reads of the damaged pages fail with 'database disk image is "
                "malformed', or return wrong rows through a damaged index",
                count=len(problems),
                command="sqlite3 DB .recover | sqlite3 NEW, from a backup if one is whole",
            )
        )
    by_table: dict[tuple[str, str], list[int]] = {}
    run_keyed = {name for name, _ in RUN_TABLES}
    for table, rowid, parent in backend.foreign_key_violations(conn):
        if parent == "runs" and table in run_keyed:
            continue
        by_table.setdefault((table, parent), []).append(rowid or 0)
    for (table, parent), rowids in sorted(by_table.items()):
        findings.append(
            Finding(
                K.FOREIGN_KEY,
                table,
                f"{len(rowids)} rows of {table} name a missing row of {parent}",
                "io-harness reads them as they are; a write with foreign keys on fails",
                key="rowid",
                rows=_rows(rowids),
                count=len(rowids),
                command=f"DELETE FROM {table} WHERE rowid IN (…); see PRAGMA foreign_key_check",
            )
        )
    return findings


def _spans(conn: Connection, table: Any, where: Any = None) -> dict[int, tuple[int, int, int]]:
    """Per run: the lowest and highest step number and how many distinct ones there are."""
    step = table.c.step
    statement = select(table.c.run_id, func.min(step), func.max(step), func.count(step.distinct()))
    if where is not None:
        statement = statement.where(where)
    return {int(r): (int(lo), int(hi), int(n)) for r, lo, hi, n in conn.execute(
        statement.group_by(table.c.run_id)
    )}  # fmt: skip


def _numbers(conn: Connection, table: Any, where: Any) -> set[int]:
    return {int(n) for n in conn.execute(select(table.c.step).where(where).distinct()).scalars()}


def suspect_runs(
    by_steps: Mapping[int, tuple[int, int, int]],
    by_marks: Mapping[int, tuple[int, int, int]],
    run_ids: frozenset[int],
) -> list[int]:
    """The existing runs whose step numbers and checkpointed step numbers may differ.

    A run whose steps and checkpoints both number exactly 1 … N has neither a lone step nor a
    lone checkpoint, which one aggregate pass over each table (`_spans`) shows for almost
    every run; only the others are compared number by number.
    """
    suspects = []
    for run_id in sorted(set(by_steps) | set(by_marks)):
        if run_id not in run_ids:
            continue  # rows of a missing run: the orphan check names them
        stored, marked = by_steps.get(run_id), by_marks.get(run_id)
        if marked is None:
            continue  # a run written without checkpoints (upstream's `record`): nothing to match
        if stored == marked and marked[0] == 1 and marked[1] == marked[2]:
            continue
        suspects.append(run_id)
    return suspects


def resume_findings(conn: Connection, run_ids: frozenset[int]) -> list[Finding]:
    """Step numbers io-harness would resume wrongly from: a step without its checkpoint (in a
    run whose steps are checkpointed), a checkpoint without its step, gaps below the last."""
    steps, events = _table("steps"), _table("checkpoint_events")
    marks = events.c.kind == "checkpoint"
    lone_steps: dict[int, list[int]] = {}
    lone_marks: dict[int, list[int]] = {}
    by_steps = _spans(conn, steps)
    by_marks = _spans(conn, events, marks)
    for run_id in suspect_runs(by_steps, by_marks, run_ids):
        stored = _numbers(conn, steps, steps.c.run_id == run_id)
        marked = _numbers(conn, events, and_(events.c.run_id == run_id, marks))
        if marked and stored - marked:
            lone_steps[run_id] = sorted(stored - marked)
        if marked - stored:
            lone_marks[run_id] = sorted(marked - stored)
    findings = []
    for run_id, numbers in sorted(lone_steps.items()):
        findings.append(
            Finding(
                K.STEP_WITHOUT_CHECKPOINT,
                "steps",
                f"run {run_id}: step {_ids(numbers)} has a steps row but no checkpoint event "
                "(a transaction cut off between its two writes)",
                f"{RESUMED}: it counts these steps as committed and never replays them",
                key="step",
                rows=_rows(numbers),
                count=len(numbers),
                command=f"DELETE FROM steps WHERE run_id = {run_id} AND step IN ({_ids(numbers)})",
            )
        )
    for run_id, numbers in sorted(lone_marks.items()):
        findings.append(
            Finding(
                K.CHECKPOINT_WITHOUT_STEP,
                "checkpoint_events",
                f"run {run_id}: a checkpoint event for step {_ids(numbers)}, which has no "
                "steps row",
                f"{RESUMED}: these steps are not in its trace, and the ones at or above the "
                "last stored step are run again",
                key="step",
                rows=_rows(numbers),
                count=len(numbers),
                command=(
                    f"DELETE FROM checkpoint_events WHERE run_id = {run_id} AND kind = "
                    f"'checkpoint' AND step IN ({_ids(numbers)})"
                ),
            )
        )
    for run_id, (low, last, distinct) in sorted(by_steps.items()):
        if run_id not in run_ids or (low >= 1 and distinct == last):
            continue
        stored = _numbers(conn, steps, steps.c.run_id == run_id)
        gaps = sorted(set(range(1, int(last) + 1)) - stored)
        if not gaps:
            continue  # numbers below 1 only: upstream never writes them, nor skips for them
        findings.append(
            Finding(
                K.STEP_GAP,
                "steps",
                f"run {run_id}: no step {_ids(gaps)} below its last step {last}",
                f"{RESUMED}, so the missing steps are marked skipped and never run",
                key="step",
                rows=_rows(gaps),
                count=len(gaps),
            )
        )
    return findings


def orphan_findings(conn: Connection, tables: Mapping[str, frozenset[str]]) -> list[Finding]:
    """Rows of every run-keyed table (leases apart) whose run does not exist."""
    runs = _table("runs")
    findings = []
    for name, key in RUN_TABLES:
        if name == "run_leases" or key not in tables.get(name, ()):
            continue
        column = _table(name).c[key]
        statement = (
            select(column, func.count())
            .where(~exists().where(runs.c.id == column))
            .group_by(column)
        )
        found = conn.execute(statement).all()
        if not found:
            continue
        missing = [int(run) for run, _ in found]
        count = sum(int(n) for _, n in found)
        findings.append(
            Finding(
                K.ORPHAN,
                name,
                f"{count} rows of {name} belong to runs that do not exist ({key} "
                f"{_ids(missing[:ROWS_SHOWN])}{' …' if len(missing) > ROWS_SHOWN else ''})",
                "io-harness reaches them only through a run of that id: none now, and a later "
                "run given the id would inherit them; a session's deletion never removes them",
                key=key,
                rows=_rows(missing),
                count=count,
                command=f"DELETE FROM {name} WHERE {key} NOT IN (SELECT id FROM runs)",
            )
        )
    return findings


def tree_findings(conn: Connection, run_ids: frozenset[int]) -> list[Finding]:
    """Children whose parent is missing, and parent links that go round in a cycle."""
    runs = _table("runs")
    parents = {
        int(child): int(parent)
        for child, parent in conn.execute(
            select(runs.c.id, runs.c.parent_run_id).where(runs.c.parent_run_id.is_not(None))
        )
    }
    findings = []
    lost = sorted(child for child, parent in parents.items() if parent not in run_ids)
    if lost:
        findings.append(
            Finding(
                K.MISSING_PARENT,
                "runs",
                f"run {_ids(lost)}: parent_run_id names a run that does not exist",
                "io-harness's tree reads from every root miss these runs and their subtrees; "
                "read on their own they are trees without a root",
                key="id",
                rows=_rows(lost),
                count=len(lost),
                command=f"UPDATE runs SET parent_run_id = NULL WHERE id IN ({_ids(lost)})",
            )
        )
    done: set[int] = set()
    for start in sorted(parents):
        path: list[int] = []
        seen: set[int] = set()
        node: int | None = start
        while node is not None and node in parents and node not in done and node not in seen:
            seen.add(node)
            path.append(node)
            node = parents[node]
        if node is not None and node in seen:
            cycle = path[path.index(node) :]
            findings.append(
                Finding(
                    K.SPAWN_CYCLE,
                    "runs",
                    f"runs {_ids(cycle)}: each one's parent_run_id leads back to itself",
                    "io-harness's tree reads (tree, spent_tokens_tree, tree_size) started at "
                    "any of them never end (a recursive query with UNION ALL)",
                    key="id",
                    rows=_rows(cycle),
                    count=len(cycle),
                    command=f"UPDATE runs SET parent_run_id = NULL WHERE id = {min(cycle)}",
                )
            )
        done.update(path)
    return findings


def lease_findings(conn: Connection) -> list[Finding]:
    leases, runs = _table("run_leases"), _table("runs")
    lost = (
        conn.execute(select(leases.c.run_id).where(~exists().where(runs.c.id == leases.c.run_id)))
        .scalars()
        .all()
    )
    if not lost:
        return []
    return [
        Finding(
            K.LEASE_OF_MISSING_RUN,
            "run_leases",
            f"a lease of run {_ids(lost)}, which does not exist",
            "io-harness never takes it over nor lets it lapse into anything: no run has it",
            key="run_id",
            rows=_rows(lost),
            count=len(lost),
            repair=f"delete the leases of run {_ids(lost)}",
        )
    ]


# --- spend counters -----------------------------------------------------------------------

SUMS = USAGE_SUMS


def spend_problems(conn: Connection) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """Run groups and (day, model) groups whose calls have no counter, and those whose kept
    answer is marked current by its counter but counts other calls than `provider_calls`."""
    calls = _table("provider_calls")
    day = func.substr(calls.c.at, 1, 10)
    model = func.coalesce(calls.c.model, UNKNOWN_MODEL)
    sums = [func.count(), *(func.coalesce(func.sum(calls.c[n]), 0) for n in SUMS)]
    actual_runs = {
        (int(r[0]),): tuple(int(v) for v in r[1:])
        for r in conn.execute(select(calls.c.run_id, *sums).group_by(calls.c.run_id))
    }
    actual_days = {
        (str(r[0]), str(r[1])): tuple(int(v) for v in r[2:])
        for r in conn.execute(select(day, model, *sums).group_by(day, model))
    }
    out: list[list[Any]] = []
    for counters, kept, actual, keys in (
        (SPEND_RUNS, PRICED_RUNS, actual_runs, ("run_id",)),
        (SPEND_DAYS, PRICED_DAYS, actual_days, ("day", "model")),
    ):
        have = {tuple(r) for r in conn.execute(select(*(counters.c[k] for k in keys)))}
        uncounted = sorted(group for group in actual if group not in have)
        joined = and_(
            *(kept.c[k] == counters.c[k] for k in keys), kept.c.changes == counters.c.changes
        )
        current = select(*(kept.c[k] for k in keys), kept.c.calls, *(kept.c[n] for n in SUMS))
        stale = sorted(
            {
                tuple(row[: len(keys)])
                for row in conn.execute(current.select_from(kept.join(counters, joined)))
                if tuple(int(v) for v in row[len(keys) :])
                != actual.get(tuple(row[: len(keys)]), (0,) * (len(SUMS) + 1))
            }
        )
        out += [uncounted, stale]
    return out[0], out[1], out[2], out[3]


def spend_findings(conn: Connection) -> list[Finding]:
    runs_uncounted, runs_stale, days_uncounted, days_stale = spend_problems(conn)
    findings = []
    for table, groups, what, key in (
        ("hs_spend_runs", runs_uncounted, "runs with calls but no counter", "run_id"),
        ("hs_spend_runs", runs_stale, "runs whose kept spend counts other calls", "run_id"),
        ("hs_spend_days", days_uncounted, "days with calls but no counter", "day/model"),
        ("hs_spend_days", days_stale, "days whose kept spend counts other calls", "day/model"),
    ):
        if not groups:
            continue
        shown = tuple("/".join(str(v) for v in g) if len(g) > 1 else g[0] for g in groups)
        findings.append(
            Finding(
                K.SPEND_COUNTER,
                table,
                f"{len(groups)} {what} in provider_calls",
                "io-harness prices calls itself and never reads the counters; harness_store's "
                "spend reads "
                + (
                    "leave these groups out"
                    if "no counter" in what
                    else "return the kept, wrong totals"
                ),
                key=key,
                rows=shown[:ROWS_SHOWN],
                count=len(groups),
                repair="recount the spend counters of these groups",
            )
        )
    return findings


def recount_spend(conn: Connection) -> int:
    """Give every group found by `spend_problems` a counter one step ahead of its kept
    answers, so they are priced again from the calls; returns the groups recounted."""
    runs_uncounted, runs_stale, days_uncounted, days_stale = spend_problems(conn)
    for counters, uncounted, stale, keys in (
        (SPEND_RUNS, runs_uncounted, runs_stale, ("run_id",)),
        (SPEND_DAYS, days_uncounted, days_stale, ("day", "model")),
    ):
        if uncounted:
            conn.execute(
                counters.insert(),
                [{**dict(zip(keys, g, strict=True)), "changes": 1} for g in uncounted],
            )
        for group in stale:
            match = and_(*(counters.c[k] == v for k, v in zip(keys, group, strict=True)))
            conn.execute(counters.update().where(match).values(changes=counters.c.changes + 1))
    return sum(len(g) for g in (runs_uncounted, runs_stale, days_uncounted, days_stale))


# --- the mixin ----------------------------------------------------------------------------


def check_store(conn: Connection, backend: Backend) -> CheckReport:
    """Every check on one connection, inside the caller's read transaction."""
    revision = read_revision(conn)
    findings = file_findings(conn, backend)
    checks = ["integrity", "foreign_keys"] if backend.name == "sqlite" else []
    schema, release = schema_findings(conn, revision)
    findings += schema
    checks.append("schema")
    tables = read_tables(conn)
    if "runs" in tables:
        runs = _table("runs")
        run_ids = frozenset(int(r) for r in conn.execute(select(runs.c.id)).scalars())
        if {"steps", "checkpoint_events"} <= tables.keys():
            findings += resume_findings(conn, run_ids)
            checks.append("resume")
        findings += orphan_findings(conn, tables)
        checks.append("orphans")
        if "parent_run_id" in tables["runs"]:
            findings += tree_findings(conn, run_ids)
            checks.append("trees")
        if "run_leases" in tables:
            findings += lease_findings(conn)
            checks.append("leases")
    present = set(inspect(conn).get_table_names())
    if "provider_calls" in tables and set(SPEND_TABLES) <= present:
        findings += spend_findings(conn)
        checks.append("spend")
    return CheckReport(tuple(findings), revision, release, tuple(checks))


class HealthMixin(StoreBase):
    """`check` and `repair` (see the module docstring)."""

    def check(self) -> CheckReport:
        """Look the whole store over, in one read transaction, and say what is wrong with
        it; changes nothing. `CheckReport.healthy` when nothing was found."""
        with self._read() as conn:
            return check_store(conn, self._backend)

    def repair(self) -> Repaired:
        """Fix what `check` finds that can be fixed without losing a row: rebuild missing
        indexes and triggers, recount spend counters, drop leases of missing runs. A SQLite
        file is backed up first; the fixes are one transaction. What would lose data is
        left as it is (`Repaired.after` still names it)."""
        report = self.check()
        fixable = [f for f in report.findings if f.repairable]
        if not fixable:
            return Repaired((), None, report)
        path = sqlite_path(self.url)
        backup = take_backup(path, f"{report.revision or 'base'}-repair") if path else None
        done: list[str] = []
        recount = False
        with self.transaction(), self._write() as conn:
            for finding in fixable:
                if finding.kind in (K.MISSING_INDEX, K.INDEX_DIFFERS):
                    index = _model_index(str(finding.rows[0]))
                    assert index is not None
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
                    leases, runs = _table("run_leases"), _table("runs")
                    gone = conn.execute(
                        leases.delete().where(~exists().where(runs.c.id == leases.c.run_id))
                    ).rowcount
                    done.append(f"deleted {gone} leases of runs that do not exist")
                elif finding.kind is K.SPEND_COUNTER:
                    recount = True
            if recount:
                groups = recount_spend(conn)
                done.append(f"recounted the spend counters of {groups} groups")
        return Repaired(tuple(done), backup, self.check())
