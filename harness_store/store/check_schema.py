"""The schema checks of `Store.check` (see `check`): tables and columns against the stamped
revision's shape, the stamp itself, indexes (`releases.indexes_at`: upstream's and harness_store's
`hs_` ones), duplicates under a missing UNIQUE index, views and triggers; and `build_index`, the
index `repair` creates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, Index, MetaData, func, inspect, select, text

from .. import models as m
from ..dialects import Backend, backend_for
from ..dialects.base import FORMAT_TABLE
from ..models.run_tokens import RUN_CALL_TOKENS, RUN_TOKENS
from ..models.spend import SPEND_TABLES
from ..records.health import ROWS_SHOWN, Finding, FindingKind
from ..releases import (
    HEAD,
    INDEXES,
    OWN_CALL_TOKENS,
    OWN_INDEXES,
    OWN_INDEXES_FILLED,
    OWN_RUN_TOKENS,
    OWN_SPEND,
    OWN_STEP_TOKENS,
    OWN_TYPED_TIMES,
    REVISIONS,
    SHAPES,
    STORE_RELEASE,
    UPSTREAM_HEAD,
    UpstreamIndex,
    indexes_at,
    own_indexes_at,
    release_of_revision,
)
from ..schema.detect import diagnose, read_tables, shape_items
from .check_rows import model_table

K = FindingKind

SPEND_TRIGGERS = frozenset({"hs_spend_insert", "hs_spend_delete", "hs_spend_update"})
"""hs3's triggers on `provider_calls`."""

RUN_TOKENS_TRIGGERS = {
    "steps": frozenset({"hs_run_tokens_insert", "hs_run_tokens_delete", "hs_run_tokens_update"}),
    "runs": frozenset({"hs_run_tokens_run_insert", "hs_run_tokens_run_delete"}),
}
"""hs6's triggers keeping each run's token total, by table."""

CALL_TOKENS_TRIGGERS = {
    "provider_calls": frozenset(
        {"hs_run_call_tokens_insert", "hs_run_call_tokens_delete", "hs_run_call_tokens_update"}
    ),
    "runs": frozenset({"hs_run_call_tokens_run_delete"}),
}
"""hs7's triggers keeping each run's total of its calls' tokens, by table."""

OWN_TABLES = frozenset({FORMAT_TABLE})
"""harness_store's own tables that `detect.read_tables` lists (PostgreSQL's stand-in for
`user_version`)."""

# --- schema -------------------------------------------------------------------------------


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
    have = shape_items(tables)
    expected = shape_items(SHAPES[release])
    known = shape_items(SHAPES[UPSTREAM_HEAD])
    later = (have & known) - expected
    missing = expected - have
    shape_release = next(
        (r for r in reversed(tuple(SHAPES)) if shape_items(SHAPES[r]) <= have), None
    )  # the newest release whose whole shape is there
    stamp_wrong = revision is not None and (
        bool(later)
        or (
            bool(missing)
            and shape_release not in (None, release)
            and missing == expected - shape_items(SHAPES[shape_release])
        )
    )
    indexes = read_indexes(conn, tables)
    present_tables = set(inspect(conn).get_table_names())
    emptied = None  # the revision of the shape of a store whose alembic_version is empty
    timed = holds_typed_times(conn)
    if revision is None and "alembic_version" in present_tables:
        at = emptied = shape_revision(release, present_tables, indexes, timed=timed)
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
        revision = shape_revision(shape_release, present_tables, indexes, timed=timed)
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
    place = REVISIONS.index(revision) if revision is not None else -1
    counted = place >= REVISIONS.index(OWN_SPEND)
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
        findings += [
            Finding(
                K.MISSING_TABLE,
                totals.name,
                f"{totals.name} ({what}) is missing",
                f"io-harness never reads it, but its {of} fail on the triggers that keep it",
                key="name",
                rows=(totals.name,),
                repair=f"create table {totals.name} and count every run's totals into it",
            )
            for totals, at, what, of in (
                (RUN_TOKENS, OWN_RUN_TOKENS, "hs6's run token totals", "writes of runs and steps"),
                (
                    RUN_CALL_TOKENS,
                    OWN_CALL_TOKENS,
                    "hs7's run call token totals",
                    "provider calls and deletions of runs",
                ),
            )
            if place >= REVISIONS.index(at) and totals.name not in present_tables
        ]
    indexed_as = revision if revision is not None else emptied
    findings += [
        duplicates_finding(conn, f, INDEXES[release]) or f
        for f in index_findings(tables, indexes, release, indexed_as)
    ]
    findings += view_findings(conn)
    if counted:
        tokens = place >= REVISIONS.index(OWN_RUN_TOKENS)
        calls = place >= REVISIONS.index(OWN_CALL_TOKENS)
        findings += trigger_findings(conn, tables, run_tokens=tokens, call_tokens=calls)
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


def holds_typed_times(conn: Connection) -> bool:
    """Whether the store holds every typed-times view `hs5` creates (a SQLite store needs
    none)."""
    return set(inspect(conn).get_view_names()) >= backend_for(conn).typed_times_views()


def view_findings(conn: Connection) -> list[Finding]:
    """Views: io-harness creates none; harness_store only the typed-times views of
    PostgreSQL (`Backend.typed_times_views`)."""
    own = backend_for(conn).typed_times_views()
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
        if name not in own
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


def shape_revision(release: str, tables: set[str], indexes: Indexes, *, timed: bool) -> str:
    """The revision a store of `release`'s shape is at, told by harness_store's own objects:
    the typed-times views (`timed`: all there, or not wanted, on SQLite), every `hs_` index
    of the head, hs3's counters, hs2's index of steps, hs1's index of trees; hs6's run
    token totals above the views, hs7's call token totals above those."""
    if release == UPSTREAM_HEAD:
        if set(SPEND_TABLES) <= tables:
            if not set(own_indexes_at(HEAD)) <= set(indexes):
                return OWN_SPEND
            if not timed:
                return OWN_INDEXES_FILLED
            if RUN_CALL_TOKENS.name in tables:
                return OWN_CALL_TOKENS
            return OWN_RUN_TOKENS if RUN_TOKENS.name in tables else OWN_TYPED_TIMES
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
    where: dict[str, Any] = (
        {"sqlite_where": text(facts.where), "postgresql_where": text(facts.where)}
        if facts.where
        else {}
    )
    return Index(name, *(table.c[c] for c in facts.columns), unique=facts.unique, **where)


def trigger_findings(
    conn: Connection,
    tables: Mapping[str, frozenset[str]],
    *,
    run_tokens: bool = False,
    call_tokens: bool = False,
) -> list[Finding]:
    """hs3's triggers missing from `provider_calls`, (`run_tokens`: a store at hs6 or later)
    hs6's from `steps` and `runs` and (`call_tokens`: at hs7 or later) hs7's from
    `provider_calls` and `runs`, and every trigger on a table that is neither io-harness's nor
    harness_store's."""
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
    families = [
        (RUN_TOKENS_TRIGGERS, backend.run_tokens_triggers_sql, "hs6's run token totals",
         "steps", "step"),
    ] if run_tokens else []  # fmt: skip
    if call_tokens:
        families.append((CALL_TOKENS_TRIGGERS, backend.call_tokens_triggers_sql,
                         "hs7's run call token totals", "calls", "provider-call"))  # fmt: skip
    for triggers, sql, what, rows, door in families:
        for table, own in sorted(triggers.items()):
            if table not in tables:
                continue
            findings += [
                Finding(
                    K.MISSING_TRIGGER,
                    table,
                    f"trigger {name} ({what}) is missing",
                    f"io-harness writes its {rows} all the same; the totals harness_store's "
                    f"{door} door reads no longer follow those writes",
                    key="name",
                    rows=(name,),
                    repair=f"create trigger {name}, then recount the run token totals",
                )
                for name in sorted(own - backend.trigger_names(conn, table))
            ]
        altered = backend.altered_triggers(conn, sql())
        findings += [
            Finding(
                K.TRIGGER_DIFFERS,
                table,
                f"trigger {name} ({what}) is not the one harness_store creates",
                f"io-harness writes its {rows} all the same; the totals harness_store's "
                f"{door} door reads may no longer follow those writes",
                key="name",
                rows=(name,),
                repair=f"create trigger {name} again, then recount the run token totals",
            )
            for table, own in sorted(triggers.items())
            for name in sorted(own & altered)
        ]
    for table in sorted(tables):
        names = backend.trigger_names(conn, table)
        unknown = names - SPEND_TRIGGERS if table == "provider_calls" else names
        unknown -= RUN_TOKENS_TRIGGERS.get(table, frozenset())
        unknown -= CALL_TOKENS_TRIGGERS.get(table, frozenset())
        unknown -= backend.own_triggers  # the roles' rules (a PostgreSQL centre's)
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
