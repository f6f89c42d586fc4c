"""The row checks of `Store.check` (see `check`): SQLite's own checks of the file, the rows
io-harness resumes from, rows of missing runs, run trees and leases (hs3's spend counters:
`check_spend`).

Each function takes a connection inside the caller's read transaction and returns `Finding`s;
none writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, and_, exists, func, select, true

from .. import models as m
from ..dialects import Backend
from ..formats import I64_MAX
from ..records.health import ROWS_SHOWN, Finding, FindingKind
from .retention_rows import RUN_TABLES

K = FindingKind

RESUMED = (
    "io-harness resumes a run after its highest step number (MAX(step)), marking every "
    "step up to it skipped"
)


def _rows(values: Iterable[int | str]) -> tuple[int | str, ...]:
    return tuple(sorted(set(values), key=lambda v: (isinstance(v, str), v)))[:ROWS_SHOWN]


def _ids(values: Iterable[int]) -> str:
    return ", ".join(str(v) for v in sorted(set(values)))


# --- rows ---------------------------------------------------------------------------------


def model_table(name: str) -> Any:
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


def integers(backend: Backend, *columns: Any) -> Any:
    """A condition true where every one of `columns` holds an integer (or NULL): the row
    checks read only those, and `value_findings` names the others."""
    kept = [backend.stored_as(c, "integer") for c in columns]
    return and_(*(k for k in kept if k is not None), true())


def _spans(table: Any, where: Any, name: str) -> Any:
    """Per run: the lowest and highest step number and how many distinct ones there are (a
    subquery: `run_id`, `lo`, `hi`, `n`)."""
    step = table.c.step
    return (
        select(
            table.c.run_id.label("run_id"),
            func.min(step).label("lo"),
            func.max(step).label("hi"),
            func.count(step.distinct()).label("n"),
        )
        .where(where)
        .group_by(table.c.run_id)
        .subquery(name)
    )


def _first(conn: Connection, numbers: Any) -> tuple[list[int], int]:
    """The first `ROWS_SHOWN` of a one-column SELECT of distinct numbers, and how many there
    are in all: never more than that many in memory."""
    found = numbers.subquery()
    column = next(iter(found.c))
    shown = conn.execute(select(column).order_by(column).limit(ROWS_SHOWN)).scalars()
    total = conn.execute(select(func.count()).select_from(found)).scalar_one()
    return [int(n) for n in shown], int(total)


def suspect_runs(by_steps: Any, by_marks: Any) -> Any:
    """The existing runs whose step numbers and checkpointed step numbers may differ, in id
    order (a SELECT of `run_id`).

    A run whose steps and checkpoints both number exactly 1 … N has neither a lone step nor a
    lone checkpoint, which one aggregate pass over each table (`_spans`) shows for almost
    every run; only the others are compared, one by one. A run without checkpoints (written
    by upstream's `record`) has nothing to match; rows of a missing run are the orphan
    check's. Only the suspects reach Python, never a row per run."""
    runs = model_table("runs")
    s, c = by_steps, by_marks
    matched = and_(
        s.c.run_id.is_not(None), s.c.lo == c.c.lo, s.c.hi == c.c.hi, s.c.n == c.c.n,
        c.c.lo == 1, c.c.hi == c.c.n,
    )  # fmt: skip
    return (
        select(c.c.run_id)
        .select_from(c.outerjoin(s, s.c.run_id == c.c.run_id))
        .where(exists().where(runs.c.id == c.c.run_id), ~matched)
        .order_by(c.c.run_id)
    )


def gapped_runs(by_steps: Any) -> Any:
    """The existing runs whose step numbers may leave a gap below the last (not 1 … N), in id
    order: a SELECT of `run_id` and the last step number."""
    runs = model_table("runs")
    s = by_steps
    return (
        select(s.c.run_id, s.c.hi)
        .where(exists().where(runs.c.id == s.c.run_id), ~and_(s.c.lo >= 1, s.c.n == s.c.hi))
        .order_by(s.c.run_id)
    )


def gap_ranges(conn: Connection, steps: Any, where: Any) -> tuple[list[tuple[int, int]], int]:
    """The step numbers missing between 1 and the last, as ranges (lowest, highest): the first
    `ROWS_SHOWN` ranges and how many numbers are missing in all, found in SQL (each number
    against the one below it) whatever the numbers are."""
    numbers = select(steps.c.step).where(where, steps.c.step >= 1).distinct().subquery()
    below = func.coalesce(func.lag(numbers.c.step).over(order_by=numbers.c.step), 0)
    pairs = select(numbers.c.step.label("step"), below.label("below")).subquery()
    ranges = (
        select((pairs.c.below + 1).label("lo"), (pairs.c.step - 1).label("hi"))
        .where(pairs.c.step > pairs.c.below + 1)
        .subquery()
    )
    shown = conn.execute(select(ranges.c.lo, ranges.c.hi).order_by(ranges.c.lo).limit(ROWS_SHOWN))
    total = conn.execute(select(func.sum(ranges.c.hi - ranges.c.lo + 1))).scalar()
    return [(int(lo), int(hi)) for lo, hi in shown], int(total or 0)


def _ranges_text(ranges: list[tuple[int, int]], total_ranges_shown: bool) -> str:
    text = ", ".join(str(lo) if lo == hi else f"{lo}–{hi}" for lo, hi in ranges)
    return text if total_ranges_shown else f"{text} …"


def _numbers_of(ranges: list[tuple[int, int]]) -> tuple[int, ...]:
    """The first `ROWS_SHOWN` numbers of the ranges."""
    out: list[int] = []
    for lo, hi in ranges:
        out.extend(range(lo, min(hi, lo + ROWS_SHOWN - len(out) - 1) + 1))
        if len(out) >= ROWS_SHOWN:
            break
    return tuple(out)


def resume_findings(conn: Connection, backend: Backend) -> list[Finding]:
    """Step numbers io-harness would resume wrongly from: a step without its checkpoint (in a
    run whose steps are checkpointed), a checkpoint without its step, gaps below the last.
    Rows whose run or step is not an integer are left to `value_findings`."""
    steps, events = model_table("steps"), model_table("checkpoint_events")
    step_rows = integers(backend, steps.c.run_id, steps.c.step)
    mark_rows = and_(
        events.c.kind == "checkpoint", integers(backend, events.c.run_id, events.c.step)
    )
    by_steps = _spans(steps, step_rows, "step_spans")
    by_marks = _spans(events, mark_rows, "mark_spans")
    findings: list[Finding] = []
    lone: list[Finding] = []
    for run_id in conn.execute(suspect_runs(by_steps, by_marks)).scalars().all():
        of_steps = and_(step_rows, steps.c.run_id == run_id)
        of_marks = and_(mark_rows, events.c.run_id == run_id)
        lone_steps = select(steps.c.step).where(
            of_steps, ~exists().where(of_marks, events.c.step == steps.c.step)
        )
        lone_marks = select(events.c.step).where(
            of_marks, ~exists().where(of_steps, steps.c.step == events.c.step)
        )
        numbers, count = _first(conn, lone_steps.distinct())
        if count:
            findings.append(
                Finding(
                    K.STEP_WITHOUT_CHECKPOINT,
                    "steps",
                    f"run {run_id}: step {_ids(numbers)}{' …' if count > len(numbers) else ''} "
                    "has a steps row but no checkpoint event (a transaction cut off between "
                    "its two writes)",
                    f"{RESUMED}: it counts these steps as committed and never replays them",
                    key="step",
                    rows=tuple(numbers),
                    count=count,
                    command=f"DELETE FROM steps WHERE run_id = {run_id} AND step IN ("
                    f"{_ids(numbers)}{', …' if count > len(numbers) else ''})",
                )
            )
        numbers, count = _first(conn, lone_marks.distinct())
        if count:
            more = count > len(numbers)
            lone.append(
                Finding(
                    K.CHECKPOINT_WITHOUT_STEP,
                    "checkpoint_events",
                    f"run {run_id}: a checkpoint event for step {_ids(numbers)}"
                    f"{' …' if more else ''}, which has no steps row",
                    f"{RESUMED}: these steps are not in its trace, and the ones at or above the "
                    "last stored step are run again",
                    key="step",
                    rows=tuple(numbers),
                    count=count,
                    command=(
                        f"DELETE FROM checkpoint_events WHERE run_id = {run_id} AND kind = "
                        f"'checkpoint' AND step IN ({_ids(numbers)}{', …' if more else ''})"
                    ),
                )
            )
    findings += lone
    for run_id, last in conn.execute(gapped_runs(by_steps)).all():
        ranges, missing = gap_ranges(conn, steps, and_(step_rows, steps.c.run_id == run_id))
        if not missing:
            continue  # numbers below 1 only: upstream never writes them, nor skips for them
        listed = sum(hi - lo + 1 for lo, hi in ranges) == missing
        findings.append(
            Finding(
                K.STEP_GAP,
                "steps",
                f"run {run_id}: no step {_ranges_text(ranges, listed)} below its last step {last}",
                f"{RESUMED}, so the missing steps are marked skipped and never run",
                key="step",
                rows=_numbers_of(ranges),
                count=missing,
            )
        )
    return findings


def orphan_findings(
    conn: Connection, backend: Backend, tables: Mapping[str, frozenset[str]]
) -> list[Finding]:
    """Rows of every run-keyed table (leases apart) whose run does not exist."""
    runs = model_table("runs")
    findings = []
    for name, key in RUN_TABLES:
        if name == "run_leases" or key not in tables.get(name, ()):
            continue
        column = model_table(name).c[key]
        statement = (
            select(column, func.count())
            .where(integers(backend, column), ~exists().where(runs.c.id == column))
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


def tree_findings(conn: Connection, backend: Backend) -> list[Finding]:
    """Children whose parent is missing, and parent links that go round in a cycle: the runs
    no root reaches (found in SQL, by a recursive walk down from every root) are the only
    ones read into Python, and only they are walked up for cycles."""
    runs = model_table("runs")
    parent = runs.alias("parent")
    linked = and_(runs.c.parent_run_id.is_not(None), integers(backend, runs.c.parent_run_id))
    has_parent = exists().where(parent.c.id == runs.c.parent_run_id)
    lost = [
        int(child)
        for child in conn.execute(
            select(runs.c.id).where(linked, ~has_parent).order_by(runs.c.id)
        ).scalars()
    ]
    findings = []
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
    reached = (
        select(runs.c.id.label("id"))
        .where(~and_(linked, has_parent))  # the roots: no parent, or one io-harness cannot find
        .cte("reached", recursive=True)
    )
    child = runs.alias("child")
    reached = reached.union_all(select(child.c.id).where(child.c.parent_run_id == reached.c.id))
    unreached = select(runs.c.id, runs.c.parent_run_id).where(~runs.c.id.in_(select(reached.c.id)))
    parents = {int(run): int(up) for run, up in conn.execute(unreached)}
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
    leases, runs = model_table("run_leases"), model_table("runs")
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


def lease_value_findings(conn: Connection, backend: Backend) -> list[Finding]:
    """Leases whose expiry io-harness cannot compute (a negative ttl, or an expiry past the
    year 9999), or whose generation no take-over can raise. Only leases whose stamp is a time
    and whose numbers are integers are looked at (the value check names the others), one row
    at a time: only the first `ROWS_SHOWN` run ids are kept."""
    from .check_values import readable_lease_rows
    from .lease_rows import expiry_fault, stamp

    leases = model_table("run_leases")
    shown: list[int] = []
    count = 0
    example = ""
    statement = select(
        leases.c.run_id, leases.c.renewed_at, leases.c.ttl_secs, leases.c.generation
    ).where(readable_lease_rows(backend, leases))
    for run_id, renewed_at, ttl, generation in conn.execute(statement.order_by(leases.c.run_id)):
        renewed = stamp(renewed_at)
        fault = None if renewed is None else expiry_fault(renewed, int(ttl))
        if fault is not None:
            fault = f"ttl_secs {fault}"
        elif int(generation) >= I64_MAX:
            fault = f"generation is {generation}, which no take-over can raise"
        if fault is None:
            continue
        count += 1
        example = example or f"run {run_id}: its {fault}"
        if len(shown) < ROWS_SHOWN:
            shown.append(int(run_id))
    if not count:
        return []
    return [
        Finding(
            K.LEASE_EXPIRY,
            "run_leases",
            f"run_leases.ttl_secs or run_leases.generation of {count} leases io-harness cannot "
            f"use ({example})",
            "io-harness's read of such a lease fails (its expiry is NULL), so its `run_lease` "
            "and any other owner's acquire fail; a generation at 2⁶³−1 cannot be taken over",
            key="run_id",
            rows=tuple(shown),
            count=count,
            command=f"UPDATE run_leases SET ttl_secs = 0 WHERE run_id IN ({_ids(shown)})",
        )
    ]
