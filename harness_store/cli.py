"""`harness-store`: look into, upgrade and copy io-harness run stores from a shell.

    harness-store inspect DB            what the file is: release, revision, format, size, rows
    harness-store upgrade DB [--to REV] [--no-backup]
    harness-store runs DB [--status S]  one line a run, newest first
    harness-store trace DB RUN          steps, policy events, approvals, checkpoints in order
    harness-store tree DB RUN           the agent tree under a run, with totals
    harness-store memory DB WORKSPACE   a workspace's memory entries
    harness-store copy SRC DST          a whole store between SQLite and PostgreSQL

DB is a file path or a SQLAlchemy URL; a password in a URL is never printed. The read commands
(inspect, runs, trace, tree, memory) open the store read-only — SQLite through a `mode=ro` URI,
PostgreSQL with `default_transaction_read_only` — so they cannot upgrade, stamp or switch the
journal mode of what they read. They read any store holding the whole 0.13 schema (at head, at
0.13, or written by a newer io-harness); an older or torn store is refused with exit code 3 and a
pointer to `harness-store upgrade`. `--json` prints machine-readable output instead of text.
Output to a terminal is drawn with Rich; piped output is plain text without ANSI codes.

Errors are one line on stderr and an exit code:

    0  done
    1  any other failure (a read-only store to upgrade, copy support missing, a driver error)
    2  usage: bad arguments or options, an unusable URL, an unknown or lower `--to` revision
    3  not a readable run store: no file there; not SQLite (empty file, directory, other file);
       another application's database; a newer checkpoint format (user_version above 7); for
       the read commands, a store older than 0.13 or torn, which needs `harness-store upgrade`
    4  locked: another process held the store past the busy timeout (5 s)
    5  not in the store: no run with that id

Set HARNESS_STORE_DEBUG=1 to see the traceback of an unexpected error.
"""

from __future__ import annotations

import heapq
import json
import os
import sqlite3
import sys
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console, JustifyMethod
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Table
from rich.text import Text
from rich.tree import Tree
from sqlalchemy import Connection, func, select, table
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from . import models as m
from .detect import Diagnosis, StoreKind, check_sqlite_file, diagnose, read_revision
from .dialects import backend_named
from .engine import read_only_url as engine_read_only_url
from .engine import safe_url, sqlite_path, to_url, where
from .errors import (
    NotADatabaseError,
    RunNotFoundError,
    SchemaError,
    StoreError,
    StoreLockedError,
    StoreNotFoundError,
    UpgradeRequiredError,
)
from .records import TreeNode
from .releases import HEAD, REVISIONS, UPSTREAM_HEAD
from .store import Store

if TYPE_CHECKING:
    from .migrate import UpgradeReport
    from .transfer import CopyReport

DEBUG_ENV = "HARNESS_STORE_DEBUG"
"""Environment variable that lets an unexpected error's traceback through."""

EXIT_OTHER, EXIT_USAGE, EXIT_NOT_A_STORE, EXIT_LOCKED, EXIT_NOT_FOUND = 1, 2, 3, 4, 5

PLAIN_WIDTH = 1_000_000
"""Console width for piped output, so Rich never wraps or cuts a line that is not a screen's."""

BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

EPILOG = (
    "\b\nExit codes (an error is one line on stderr):\n"
    + (__doc__ or "").partition("an exit code:\n\n")[2].rstrip()
)
"""The exit-code table of the module docstring, kept as it is laid out (`\\b`) in --help."""


class CliError(Exception):
    """A failure the command reports as one line with a chosen exit code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


app = typer.Typer(
    name="harness-store",
    help=(__doc__ or "").split("\n\n", 1)[0]
    + "\n\nRead commands open the store read-only and never change it; a store older than "
    "0.13 (or torn) must first be brought up with `harness-store upgrade` (exit code 3).",
    epilog=EPILOG,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

DbArg = Annotated[str, typer.Argument(metavar="DB", help="Store file path or SQLAlchemy URL.")]
RunArg = Annotated[int, typer.Argument(metavar="RUN", help="Run id.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


# --- output ------------------------------------------------------------------------------


def stdout_console() -> Console:
    """Rich on a terminal; on a pipe, a console with no colour and no width limit."""
    console = Console(highlight=False, emoji=False)
    if console.is_terminal:
        return console
    return Console(highlight=False, emoji=False, no_color=True, width=PLAIN_WIDTH)


def stderr_console() -> Console:
    """Where progress displays go, so they never mix into the command's output."""
    return Console(stderr=True, highlight=False, emoji=False)


def visible(value: object) -> str:
    """A value as one line of text: control and bidi characters shown as escapes."""
    if value is None:
        return "—"
    return "".join(
        c.encode("unicode_escape").decode("ascii")
        if unicodedata.category(c) == "Cc" or c in BIDI_CONTROLS
        else c
        for c in str(value)
    )


def emit_json(document: object) -> None:
    """Print one JSON document on stdout."""
    sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")


def emit_table(
    columns: Sequence[tuple[str, JustifyMethod]],
    rows: Iterable[Sequence[object]],
    *,
    title: str | None = None,
) -> None:
    """A table: a Rich table on a terminal, aligned plain lines otherwise.

    `columns` are (header, justify) pairs; the last column is never padded (it holds text such
    as a goal or a decision, which may be long).
    """
    console = stdout_console()
    cells = [[visible(v) for v in row] for row in rows]
    if console.is_terminal:
        grid = Table(title=title, title_justify="left", highlight=False)
        for index, (header, justify) in enumerate(columns):
            last = index == len(columns) - 1
            grid.add_column(header, justify=justify, no_wrap=not last, overflow="fold")
        for row in cells:
            grid.add_row(*(Text(c) for c in row))
        console.print(grid)
        return
    from rich.cells import cell_len

    headers = [header for header, _ in columns]
    widths = [max([cell_len(h), *(cell_len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    if title:
        console.print(Text(title))
    for row in [headers, *cells]:
        parts = []
        for i, (value, (_, justify)) in enumerate(zip(row, columns, strict=True)):
            pad = " " * (widths[i] - cell_len(value))
            last = i == len(columns) - 1
            parts.append(pad + value if justify == "right" else value + ("" if last else pad))
        console.print(Text("  ".join(parts).rstrip()))


def emit_pairs(pairs: Sequence[tuple[str, str]]) -> None:
    """Label/value lines, aligned."""
    console = stdout_console()
    width = max(len(label) for label, _ in pairs) + 2
    for label, value in pairs:
        line = Text(f"{label}:".ljust(width), style="bold" if console.is_terminal else "")
        line.append(value)
        console.print(line)


def human_size(size: int) -> str:
    """Bytes with thousands separators and a binary-prefixed approximation."""
    value, unit = float(size), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{size:,} bytes" + ("" if unit == "B" else f" ({value:.1f} {unit})")


def human_duration(ms: int | None) -> str:
    """Milliseconds for a person: 850ms, 12.3s, 4m05s, 2h03m."""
    if ms is None:
        return "—"
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def short_time(stamp: str | None) -> str:
    """`2026-07-31T01:39:56.041Z` as `2026-07-31 01:39:56`."""
    return "—" if stamp is None else stamp.replace("T", " ")[:19]


# --- opening a store read-only -----------------------------------------------------------


def parse_target(db: str) -> URL:
    """The URL for a path or URL argument; an unusable URL is a usage error."""
    try:
        url = to_url(db)
        backend_named(url.get_backend_name())
    except (ArgumentError, NoSuchModuleError, ValueError, SchemaError) as exc:
        raise CliError(
            EXIT_USAGE, f"{shown(db)} is not a usable store path or URL: {exc}"
        ) from None
    return url


def shown(db: str) -> str:
    """An argument as messages may print it: a URL's password hidden, even in a bad URL."""
    if "://" not in db:
        return repr(db)
    try:
        return repr(make_url(db).render_as_string(hide_password=True))
    except (ArgumentError, ValueError):
        return "the URL given" if "@" in db else repr(db)


def check_file(path: Path) -> None:
    """Refuse a path that is no SQLite store before SQLite opens it; a read-only file is fine."""
    if not path.exists():
        raise StoreNotFoundError(f"no run store at {path}")
    check_sqlite_file(path, writable=False)


def read_only_url(url: URL) -> URL:
    """The same store, opened so that no statement can write to it."""
    try:
        return engine_read_only_url(url)
    except ValueError as exc:
        raise CliError(
            EXIT_USAGE, "an in-memory SQLite database holds no store; give a file"
        ) from exc


def sqlite_uri(url: URL) -> bool:
    """Whether a SQLite URL already names its file as a `file:` URI (`?uri=true`)."""
    return str(url.query.get("uri", "")).lower() in ("true", "1")


@dataclass
class Reader:
    """A store opened read-only, with what it was found to be."""

    store: Store
    url: URL
    found: Diagnosis

    @property
    def where(self) -> str:
        return where(self.url)

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A connection inside one read transaction."""
        with self.store.engine.connect() as conn, conn.begin():
            yield conn


@contextmanager
def open_reader(db: str, *, require_readable: bool = True) -> Iterator[Reader]:
    """Open `db` read-only and diagnose it; refuse what cannot be read (see the exit codes)."""
    url = parse_target(db)
    path = sqlite_path(url)
    if path is not None and not sqlite_uri(url):
        check_file(path)
    store = Store(read_only_url(url))
    try:
        with store.engine.connect() as conn, conn.begin():
            reader = Reader(store, url, diagnose(conn))
        if require_readable:
            refuse_unreadable(reader)
        yield reader
    finally:
        store.close()


def refuse_unreadable(reader: Reader) -> None:
    """Raise for a store the read commands cannot read without an upgrade."""
    found = reader.found
    if found.kind is StoreKind.EMPTY:
        raise NotADatabaseError(f"{reader.where} is an empty database (no tables), not a run store")
    if not found.holds_upstream_head:
        raise UpgradeRequiredError(
            f"{reader.where}: {found.describe()}; reading it needs the {UPSTREAM_HEAD} schema "
            f"— run `harness-store upgrade {reader.where}` first (nothing was changed)"
        )


# --- inspect -----------------------------------------------------------------------------


def table_order(names: Iterable[str]) -> list[str]:
    """The 0.13 tables in the models' order, then any others alphabetically."""
    known = [name for name in m.Base.metadata.tables if name in names]
    return known + sorted(set(names) - set(known))


def inspect_document(reader: Reader) -> dict[str, Any]:
    """Everything `inspect` reports, as one JSON-ready mapping."""
    found = reader.found
    path = sqlite_path(reader.url)
    with reader.connection() as conn:
        revision = read_revision(conn)
        counts = {
            name: int(conn.execute(select(func.count()).select_from(table(name))).scalar_one())
            for name in table_order(found.tables)
        }
        if conn.dialect.name == "sqlite":
            journal = str(conn.exec_driver_sql("PRAGMA journal_mode").scalar_one()).lower()
            size = path.stat().st_size if path is not None else 0
        else:
            journal = None
            size = int(
                conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar_one()
            )
    wal = path.with_name(path.name + "-wal") if path is not None else None
    return {
        "store": safe_url(reader.url),
        "path": str(path) if path is not None else None,
        "backend": reader.url.get_backend_name(),
        "kind": found.kind.value,
        "description": found.describe(),
        "release": found.release,
        "torn_of": found.torn_of,
        "present": list(found.present),
        "missing": list(found.missing),
        "extra": list(found.extra),
        "revision": revision,
        "shape_revision": found.revision,
        "head": HEAD,
        "at_head": revision == HEAD,
        "readable": found.kind is not StoreKind.EMPTY and found.holds_upstream_head,
        "user_version": found.user_version,
        "journal_mode": journal,
        "size_bytes": size,
        "wal_bytes": wal.stat().st_size if wal is not None and wal.exists() else None,
        "tables": counts,
    }


@app.command("inspect", epilog=EPILOG)
def inspect_command(db: DbArg, as_json: JsonOpt = False) -> None:
    """What this store is: the io-harness release its shape matches (or "torn open of X", or
    "newer than 0.13"), its Alembic revision, user_version, journal mode, size and rows per
    table. Read-only: the file's bytes stay the same."""
    with open_reader(db, require_readable=False) as reader:
        doc = inspect_document(reader)
    if as_json:
        emit_json(doc)
        return
    if doc["revision"] is not None:
        revision = f"{doc['revision']} (stamped)"
    elif doc["shape_revision"] is not None:
        revision = f"not stamped; its shape is revision {doc['shape_revision']}"
    else:
        revision = "not stamped"
    if doc["at_head"]:
        state = f"at head ({HEAD})"
    elif doc["kind"] == StoreKind.EMPTY.value:
        state = "no run store yet (`harness-store upgrade` would create one)"
    else:
        state = f"below head ({HEAD}): run `harness-store upgrade {reader.where}`"
        if not doc["readable"]:
            state += " before the read commands can read it"
    size = human_size(doc["size_bytes"])
    if doc["wal_bytes"] is not None:
        size += f"; -wal {human_size(doc['wal_bytes'])}"
    emit_pairs(
        [
            ("store", reader.where),
            ("is", doc["description"]),
            ("revision", revision),
            ("upgrade", state),
            ("user_version", str(doc["user_version"])),
            ("journal mode", doc["journal_mode"] or "n/a (PostgreSQL)"),
            ("size", size),
        ]
    )
    emit_table(
        [("table", "left"), ("rows", "right")],
        [(name, f"{count:,}") for name, count in doc["tables"].items()],
    )


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
    from .migrate import upgrade

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


# --- runs --------------------------------------------------------------------------------


def step_totals(conn: Connection, run_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """Per run: (highest step, total tokens) from its steps, for the given runs only."""
    s = m.Step
    totals: dict[int, tuple[int, int]] = {}
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start : start + 500]
        statement = (
            select(s.run_id, func.max(s.step), func.sum(s.tokens))
            .where(s.run_id.in_(chunk))
            .group_by(s.run_id)
        )
        for run_id, steps, tokens in conn.execute(statement):
            totals[int(run_id)] = (int(steps or 0), int(tokens or 0))
    return totals


def run_rows(reader: Reader, status: str | None, limit: int | None) -> list[dict[str, Any]]:
    """The runs, newest first, with their step and token totals and recorded duration."""
    r, o = m.Run, m.RunOutcome
    statement = (
        select(
            r.id,
            r.parent_run_id,
            r.depth,
            r.status,
            r.outcome,
            r.started_at,
            o.duration_ms,
            o.success,
            r.goal,
        )
        .outerjoin(o, o.run_id == r.id)
        .order_by(r.id.desc())
    )
    if status is not None:
        statement = statement.where(r.status == status)
    if limit is not None:
        statement = statement.limit(limit)
    with reader.connection() as conn:
        rows = conn.execute(statement).all()
        totals = step_totals(conn, [int(row[0]) for row in rows])
    return [
        {
            "run_id": row[0],
            "parent_run_id": row[1],
            "depth": row[2],
            "status": row[3],
            "outcome": row[4],
            "steps": totals.get(row[0], (0, 0))[0],
            "tokens": totals.get(row[0], (0, 0))[1],
            "started_at": row[5],
            "duration_ms": row[6],
            "success": None if row[7] is None else bool(row[7]),
            "goal": row[8],
        }
        for row in rows
    ]


@app.command("runs", epilog=EPILOG)
def runs_command(
    db: DbArg,
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            metavar="STATUS",
            help="Only runs with this status: running, paused, completed, failed.",
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, metavar="N", help="At most N runs.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """One line a run, newest first: id, parent, status, outcome, steps, tokens, started,
    duration (recorded for runs finished by 0.12+), goal. Read-only."""
    with open_reader(db) as reader:
        rows = run_rows(reader, status, limit)
    if as_json:
        emit_json(rows)
        return
    if not rows:
        stderr_console().print(Text("no runs" + (f" with status {status}" if status else "")))
        return
    emit_table(
        [
            ("id", "right"),
            ("parent", "right"),
            ("status", "left"),
            ("outcome", "left"),
            ("steps", "right"),
            ("tokens", "right"),
            ("started", "left"),
            ("duration", "right"),
            ("goal", "left"),
        ],
        [
            (
                row["run_id"],
                row["parent_run_id"],
                row["status"],
                row["outcome"],
                row["steps"],
                f"{row['tokens']:,}",
                short_time(row["started_at"]),
                human_duration(row["duration_ms"]),
                row["goal"],
            )
            for row in rows
        ],
    )


# --- trace -------------------------------------------------------------------------------

ENTRY_RANK = {"policy": 0, "approval": 1, "step": 2, "checkpoint": 3}
"""Within one step number: what happened during the step, then the step, then its checkpoint."""


@dataclass(frozen=True)
class Entry:
    """One line of a trace: a step row or an event, with the fields JSON shows."""

    step: int
    type: str
    seq: int
    tokens: int | None
    summary: str
    fields: Mapping[str, Any]

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.step, ENTRY_RANK[self.type], self.seq)

    def document(self) -> dict[str, Any]:
        return {"type": self.type, "step": self.step, **self.fields}


def run_header(reader: Reader, run_id: int) -> dict[str, Any]:
    """The run's own row; `RunNotFoundError` when there is none."""
    r = m.Run
    with reader.connection() as conn:
        row = conn.execute(
            select(r.id, r.parent_run_id, r.goal, r.status, r.outcome, r.started_at).where(
                r.id == run_id
            )
        ).first()
    if row is None:
        raise RunNotFoundError(f"no run with id {run_id} in {reader.where}")
    keys = ("run_id", "parent_run_id", "goal", "status", "outcome", "started_at")
    return dict(zip(keys, row, strict=True))


def event_entries(reader: Reader, run_id: int) -> list[Entry]:
    """The run's policy events, approvals and checkpoint events, in trace order."""
    store = reader.store
    entries: list[Entry] = []
    for seq, e in enumerate(store.events(run_id)):
        if e.kind == "refusal":
            summary = f"refused {e.act} {e.target}"
            if e.rule:
                summary += f" (rule {e.rule}" + (f", layer {e.layer})" if e.layer else ")")
        else:
            summary = " ".join(filter(None, (e.kind, e.decision, "on", e.act, e.target)))
            if e.source:
                summary += f" by {e.source}"
        if e.performed:
            summary += f"; performed {e.performed}"
        fields: dict[str, Any] = {
            "kind": e.kind,
            "act": e.act,
            "target": e.target,
            "rule": e.rule,
            "layer": e.layer,
            "decision": e.decision,
            "source": e.source,
            "performed": e.performed,
        }
        entries.append(Entry(e.step, "policy", seq, None, summary, fields))
    approvals = [
        (a.id, a.step, a.act, a.target, a.content, a.resolved)
        for a in store.pending_for_run(run_id)
    ]
    for seq, (request_id, step, act, target, content, resolved) in enumerate(approvals):
        summary = f"approval #{request_id} {act} {target}: {resolved or 'pending'}"
        fields = {
            "request_id": request_id,
            "act": act,
            "target": target,
            "content": content,
            "resolved": resolved,
        }
        entries.append(Entry(step, "approval", seq, None, summary, fields))
    for seq, c in enumerate(store.checkpoint_events(run_id)):
        summary = c.kind + (f": {c.detail}" if c.detail else "")
        entries.append(
            Entry(c.step, "checkpoint", seq, None, summary, {"kind": c.kind, "detail": c.detail})
        )
    return sorted(entries, key=lambda entry: entry.key)


def trace_entries(reader: Reader, run_id: int) -> Iterator[Entry]:
    """The run's steps (streamed) merged with its events, in order."""
    steps = (
        Entry(
            s.step,
            "step",
            seq,
            s.tokens,
            s.decision + (f" → {s.tool_call}" if s.tool_call else ""),
            {
                "decision": s.decision,
                "tool_call": s.tool_call,
                "tokens": s.tokens,
                "result": s.result,
            },
        )
        for seq, s in enumerate(reader.store.iter_steps(run_id))
    )
    return heapq.merge(steps, event_entries(reader, run_id), key=lambda entry: entry.key)


@app.command("trace", epilog=EPILOG)
def trace_command(db: DbArg, run: RunArg, as_json: JsonOpt = False) -> None:
    """A run's trace in order: steps (decision, tool call, tokens), policy refusals and
    decisions, approvals (pending or resolved), checkpoint and resume events. Read-only."""
    with open_reader(db) as reader:
        header = run_header(reader, run)
        if as_json:
            entries = [entry.document() for entry in trace_entries(reader, run)]
            tokens = sum(e["tokens"] for e in entries if e["type"] == "step")
            emit_json({**header, "tokens": tokens, "entries": entries})
            return
        stdout_console().print(
            Text(
                f"run {run}  {visible(header['status'])}  {visible(header['outcome'])}  "
                f"{visible(header['goal'])}"
            )
        )
        emit_table(
            [("step", "right"), ("type", "left"), ("tokens", "right"), ("what", "left")],
            (
                (e.step, e.type, "" if e.tokens is None else f"{e.tokens:,}", e.summary)
                for e in trace_entries(reader, run)
            ),
        )


# --- tree --------------------------------------------------------------------------------


def node_label(node: TreeNode) -> str:
    """One node of the drawn tree."""
    return (
        f"run {node.run_id}  {node.status}  {node.outcome or '—'}  {node.steps} steps  "
        f"{node.tokens:,} tokens  {node.goal}"
    )


@app.command("tree", epilog=EPILOG)
def tree_command(db: DbArg, run: RunArg, as_json: JsonOpt = False) -> None:
    """The agent tree under RUN: each run's status, outcome, steps and tokens, and the tree's
    totals. Read-only."""
    with open_reader(db) as reader:
        nodes = reader.store.tree(run)
    if not nodes:
        raise RunNotFoundError(f"no run with id {run} in {reader.where}")
    children: dict[int | None, list[TreeNode]] = {}
    for node in nodes:
        children.setdefault(node.parent_run_id, []).append(node)
    totals = {
        "runs": len(nodes),
        "steps": sum(n.steps for n in nodes),
        "tokens": sum(n.tokens for n in nodes),
    }
    if as_json:
        emit_json(
            {
                "root": run,
                **totals,
                "run_ids": [n.run_id for n in nodes],
                "nodes": [
                    {
                        "run_id": n.run_id,
                        "parent_run_id": n.parent_run_id,
                        "depth": n.depth,
                        "goal": n.goal,
                        "status": n.status,
                        "outcome": n.outcome,
                        "steps": n.steps,
                        "tokens": n.tokens,
                        "started_at": n.started_at,
                        "children": [c.run_id for c in children.get(n.run_id, [])],
                    }
                    for n in nodes
                ],
            }
        )
        return
    by_id = {n.run_id: n for n in nodes}
    root = by_id[run]
    drawn = Tree(Text(visible(node_label(root))))
    seen = {root.run_id}
    pending: list[tuple[Tree, TreeNode]] = [(drawn, root)]
    while pending:
        branch, node = pending.pop(0)
        for child in children.get(node.run_id, []):
            if child.run_id in seen:  # a corrupt store's cycle: draw each run once
                continue
            seen.add(child.run_id)
            pending.append((branch.add(Text(visible(node_label(child)))), child))
    console = stdout_console()
    console.print(drawn)
    console.print(
        Text(
            f"{totals['runs']} runs, {totals['steps']} steps, {totals['tokens']:,} tokens",
            style="bold" if console.is_terminal else "",
        )
    )


# --- memory ------------------------------------------------------------------------------


@app.command("memory", epilog=EPILOG)
def memory_command(
    db: DbArg,
    workspace: Annotated[str, typer.Argument(metavar="WORKSPACE", help="Workspace path.")],
    as_json: JsonOpt = False,
) -> None:
    """A workspace's memory entries, oldest first: key, value, the run and step that wrote it,
    when. Read-only."""
    with open_reader(db) as reader:
        entries = reader.store.memory_list(workspace)
        others: list[str] = []
        if not entries and not as_json:
            with reader.connection() as conn:
                others = list(
                    conn.execute(select(m.Memory.workspace).distinct().order_by(m.Memory.workspace))
                    .scalars()
                    .all()
                )
    if as_json:
        emit_json(
            {
                "workspace": workspace,
                "entries": [
                    {
                        "key": e.key,
                        "value": e.value,
                        "run_id": e.run_id,
                        "step": e.step,
                        "created_at": e.created_at,
                    }
                    for e in entries
                ],
            }
        )
        return
    if not entries:
        known = ", ".join(visible(w) for w in others) or "none"
        stderr_console().print(
            Text(f"no memory entries in workspace {visible(workspace)} (workspaces: {known})")
        )
        return
    emit_table(
        [
            ("key", "left"),
            ("run", "right"),
            ("step", "right"),
            ("created", "left"),
            ("value", "left"),
        ],
        [(e.key, e.run_id, e.step, short_time(e.created_at), e.value) for e in entries],
    )


# --- copy --------------------------------------------------------------------------------


def load_copy_store() -> Callable[..., CopyReport]:
    """`transfer.copy_store`, imported only when `copy` runs (it is its only user)."""
    try:
        from .transfer import copy_store
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.transfer":
            raise
        raise CliError(
            EXIT_OTHER, "copy needs harness_store.transfer, which this installation lacks"
        ) from None
    return copy_store


class CopyProgress:
    """The `progress` callback of `copy_store`: a Rich bar per table on a terminal, one line
    per finished table otherwise (on stderr, so stdout keeps only the result)."""

    def __init__(self, console: Console, *, quiet: bool) -> None:
        self.console = console
        self.quiet = quiet
        self.bars: Progress | None = None
        self.tasks: dict[str, TaskID] = {}
        self.finished: set[str] = set()
        if console.is_terminal and not quiet:
            self.bars = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                console=console,
                transient=False,
            )

    def __enter__(self) -> CopyProgress:
        if self.bars is not None:
            self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bars is not None:
            self.bars.stop()

    def __call__(self, name: str, done: int, total: int) -> None:
        if self.bars is not None:
            if name not in self.tasks:
                self.tasks[name] = self.bars.add_task(name, total=total)
            self.bars.update(self.tasks[name], completed=done, total=total)
        elif not self.quiet and done == total > 0 and name not in self.finished:
            self.finished.add(name)
            self.console.print(Text(f"{name}: {done:,}/{total:,} rows"))


@app.command("copy", epilog=EPILOG)
def copy_command(
    source: Annotated[str, typer.Argument(metavar="SRC", help="Store to copy from.")],
    target: Annotated[str, typer.Argument(metavar="DST", help="Store to copy into.")],
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, metavar="N", help="Rows per batch.")
    ] = 1000,
    as_json: JsonOpt = False,
) -> None:
    """Copy a whole store between SQLite and PostgreSQL (either way), with every row count
    verified; a progress bar per table on a terminal."""
    copy_store = load_copy_store()
    parse_target(source), parse_target(target)
    with CopyProgress(stderr_console(), quiet=as_json) as progress:
        report = copy_store(source, target, batch_size=batch_size, progress=progress)
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
                "seconds": report.seconds,
            }
        )
        return
    console = stdout_console()
    for line in report.describe():
        console.print(Text(line))


# --- errors and entry point --------------------------------------------------------------


def one_line(message: str) -> str:
    """A message as a single line (driver errors span several)."""
    first = next((line for line in message.splitlines() if line.strip()), message)
    return " ".join(first.split())


def classify(exc: BaseException) -> tuple[int, str]:
    """The exit code and one-line message for an error (see the module docstring)."""
    if isinstance(exc, CliError):
        return exc.code, str(exc)
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        return classify(exc.orig)
    if isinstance(exc, StoreLockedError):
        return EXIT_LOCKED, str(exc)
    if isinstance(exc, SchemaError | StoreNotFoundError):
        return EXIT_NOT_A_STORE, str(exc)
    if isinstance(exc, RunNotFoundError):
        return EXIT_NOT_FOUND, str(exc)
    if isinstance(exc, StoreError):
        return EXIT_OTHER, str(exc)
    if isinstance(exc, sqlite3.Error):
        typed = backend_named("sqlite").translate_error(exc)
        if typed is not None:
            return classify(typed)
        if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
            return EXIT_NOT_A_STORE, f"not a SQLite database: {exc}"
        return EXIT_OTHER, f"SQLite error: {exc}"
    if type(exc).__module__.startswith("psycopg"):
        typed = backend_named("postgresql").translate_error(exc)
        if typed is not None:
            return classify(typed)
        return EXIT_OTHER, f"PostgreSQL error: {exc}"
    if isinstance(exc, ArgumentError | NoSuchModuleError):
        return EXIT_USAGE, str(exc)
    if type(exc).__name__ == "CommandError" and type(exc).__module__.startswith("alembic"):
        return EXIT_USAGE, f"alembic: {exc}"
    if isinstance(exc, SQLAlchemyError):
        return EXIT_OTHER, f"database error: {exc}"
    if isinstance(exc, OSError):
        return EXIT_OTHER, f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    return EXIT_OTHER, f"unexpected {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 for details)"


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command; turn every error into one line on stderr and its exit code."""
    try:
        app(args=list(argv) if argv is not None else None, prog_name="harness-store")
    except Exception as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        code, message = classify(exc)
        sys.stderr.write(f"harness-store: error: {one_line(message)}\n")
        sys.exit(code)


if __name__ == "__main__":
    main()
