"""Build SQLite run stores exactly as io-harness releases 0.1 … 0.13 leave them.

The test-suite needs real legacy stores (born at a release, grown release by release, or
torn by a crash during an open) without any io-harness binary. Everything here follows the
upstream `src/state.rs` of each tag: the statements an open runs and in which order, the SQL
each write and read method runs, and the row formats. Standard library only, and deliberately
independent of `harness_store`, so it can judge it.
"""

from __future__ import annotations

import itertools
import json
import random
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RELEASES: tuple[str, ...] = tuple(f"0.{n}" for n in range(1, 14))

#: The checkpoint format 0.7+ stamps into `PRAGMA user_version`.
CHECKPOINT_FORMAT = 7

#: Statements 0.12+'s `Store::open` runs on a file before the open sequence.
FILE_PRAGMAS: tuple[str, ...] = ("PRAGMA busy_timeout = 5000", "PRAGMA journal_mode = WAL")

#: Workspaces `write_rows` keeps memory in (fixed, so `read_answers` can list them).
WORKSPACES: tuple[str, ...] = ("/work/ws-alpha", "/tmp/ünï 'ws' \"β\"")

#: Ledger observation kinds as 0.13 stores them.
OBS_KINDS: tuple[str, ...] = (
    "read",
    "grep",
    "find",
    "write",
    "skill",
    "tool",
    "mcp",
    "child",
    "message",
    "error",
)

BIG = 2**53 + 1
LONG_TEXT_CHARS = 100_000

# Awkward text values; each `write_rows` call stores every one of them verbatim somewhere.
AWKWARD: tuple[str, ...] = (
    "it's a 'single' quote",
    'say "double" quotes',
    "'; DROP TABLE runs; --",
    "Robert'); DROP TABLE steps;--",
    "100% _like_ wildcards \\ backslash",
    "crab 🦀 rocket 🚀 family 👩\u200d👩\u200d👧",
    "日本語のテキスト 中文 한국어",
    "combining e\u0301 a\u0308 n\u0303",
    "RTL مرحبا بالعالم שלום \u202eoverride",
    "",
    "tab\there\r\nCRLF and\nnewline",
    "nul\x00inside",
    '{"json": [1, 2, {"k": "v"}]}',
)


def _minor(release: str) -> int:
    """Return the minor number of a release name, rejecting names outside 0.1 … 0.13."""
    if release not in RELEASES:
        raise ValueError(f"unknown release {release!r}; expected one of {RELEASES}")
    return int(release.split(".")[1])


def _create(table: str, *columns: str) -> str:
    """Render a CREATE statement with upstream's exact whitespace (SQLite stores it verbatim)."""
    body = ",\n".join(" " * 17 + c for c in columns)
    return f"CREATE TABLE IF NOT EXISTS {table} (\n{body}\n{' ' * 13})"


_RUNS_0_1 = _create(
    "runs",
    "id      INTEGER PRIMARY KEY AUTOINCREMENT",
    "goal    TEXT NOT NULL",
    "file    TEXT NOT NULL",
    "outcome TEXT",
)
_RUNS_0_3 = _create(
    "runs",
    "id       INTEGER PRIMARY KEY AUTOINCREMENT",
    "goal     TEXT NOT NULL",
    "file     TEXT NOT NULL",
    "outcome  TEXT",
    "provider TEXT",
)
_STEPS_COLS_0_1 = (
    "id       INTEGER PRIMARY KEY AUTOINCREMENT",
    "run_id   INTEGER NOT NULL REFERENCES runs(id)",
    "step     INTEGER NOT NULL",
    "decision TEXT NOT NULL",
    "result   TEXT NOT NULL",
)
_STEPS_0_1 = _create("steps", *_STEPS_COLS_0_1)
_STEPS_0_2 = _create(
    "steps",
    *_STEPS_COLS_0_1,
    "prompt    TEXT NOT NULL DEFAULT ''",
    "tool_call TEXT NOT NULL DEFAULT ''",
    "tokens    INTEGER NOT NULL DEFAULT 0",
)
_STAMP = f"PRAGMA user_version = {CHECKPOINT_FORMAT}"

# Every statement after the runs/steps CREATEs, in upstream order, with the minor release
# that introduced it.
_LATER: tuple[tuple[int, str], ...] = (
    (2, "ALTER TABLE steps ADD COLUMN prompt TEXT NOT NULL DEFAULT ''"),
    (2, "ALTER TABLE steps ADD COLUMN tool_call TEXT NOT NULL DEFAULT ''"),
    (2, "ALTER TABLE steps ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0"),
    (3, "ALTER TABLE runs ADD COLUMN provider TEXT"),
    (
        4,
        _create(
            "policy_events",
            "id        INTEGER PRIMARY KEY AUTOINCREMENT",
            "run_id    INTEGER NOT NULL",
            "step      INTEGER NOT NULL",
            "kind      TEXT NOT NULL",
            "act       TEXT NOT NULL",
            "target    TEXT NOT NULL",
            "rule      TEXT",
            "layer     TEXT",
            "decision  TEXT",
            "source    TEXT",
            "performed TEXT",
        ),
    ),
    (
        4,
        _create(
            "pending_approvals",
            "id       INTEGER PRIMARY KEY AUTOINCREMENT",
            "run_id   INTEGER NOT NULL",
            "step     INTEGER NOT NULL",
            "act      TEXT NOT NULL",
            "target   TEXT NOT NULL",
            "content  TEXT",
            "resolved TEXT",
        ),
    ),
    (5, "ALTER TABLE runs ADD COLUMN parent_run_id INTEGER"),
    (5, "ALTER TABLE runs ADD COLUMN depth INTEGER NOT NULL DEFAULT 0"),
    (
        5,
        _create(
            "agent_events",
            "id           INTEGER PRIMARY KEY AUTOINCREMENT",
            "run_id       INTEGER NOT NULL",
            "step         INTEGER NOT NULL",
            "kind         TEXT NOT NULL",
            "child_run_id INTEGER",
            "detail       TEXT",
            "tokens       INTEGER",
            "remaining    INTEGER",
        ),
    ),
    (
        6,
        _create(
            "sandbox_events",
            "id       INTEGER PRIMARY KEY AUTOINCREMENT",
            "run_id   INTEGER NOT NULL",
            "step     INTEGER NOT NULL",
            "kind     TEXT NOT NULL",
            "backend  TEXT",
            "detail   TEXT",
        ),
    ),
    (7, "ALTER TABLE runs ADD COLUMN status TEXT NOT NULL DEFAULT 'running'"),
    (7, "ALTER TABLE runs ADD COLUMN started_at TEXT"),
    (
        7,
        _create(
            "checkpoint_events",
            "id     INTEGER PRIMARY KEY AUTOINCREMENT",
            "run_id INTEGER NOT NULL",
            "step   INTEGER NOT NULL",
            "kind   TEXT NOT NULL",
            "detail TEXT",
        ),
    ),
    (
        7,
        _create(
            "spawns",
            "id            INTEGER PRIMARY KEY AUTOINCREMENT",
            "parent_run_id INTEGER NOT NULL",
            "step          INTEGER NOT NULL",
            "child_run_id  INTEGER NOT NULL",
            "goal          TEXT NOT NULL",
            "verify_file   TEXT NOT NULL",
            "needle        TEXT NOT NULL",
            "max_steps     INTEGER",
            "deny_write    TEXT NOT NULL DEFAULT '[]'",
        ),
    ),
    (
        8,
        _create(
            "mcp_events",
            "id     INTEGER PRIMARY KEY AUTOINCREMENT",
            "run_id INTEGER NOT NULL",
            "step   INTEGER NOT NULL",
            "kind   TEXT NOT NULL",
            "server TEXT NOT NULL",
            "tool   TEXT",
            "ok     INTEGER",
            "millis INTEGER",
            "detail TEXT",
        ),
    ),
    (
        10,
        _create(
            "memory",
            "id         INTEGER PRIMARY KEY",
            "workspace  TEXT NOT NULL",
            "key        TEXT NOT NULL",
            "value      TEXT NOT NULL",
            "run_id     INTEGER NOT NULL",
            "step       INTEGER NOT NULL",
            "created_at TEXT NOT NULL",
            "UNIQUE(workspace, key)",
        ),
    ),
    (
        10,
        _create(
            "context_events",
            "id              INTEGER PRIMARY KEY",
            "run_id          INTEGER NOT NULL",
            "step            INTEGER NOT NULL",
            "kind            TEXT NOT NULL",
            "detail          TEXT",
            "est_tokens      INTEGER",
            "reported_tokens INTEGER",
        ),
    ),
    (
        12,
        _create(
            "run_outcomes",
            "run_id      INTEGER PRIMARY KEY",
            "outcome     TEXT NOT NULL",
            "success     INTEGER NOT NULL",
            "steps       INTEGER NOT NULL",
            "tokens      INTEGER NOT NULL",
            "duration_ms INTEGER",
            "finished_at TEXT NOT NULL",
        ),
    ),
    (13, _create("run_policies", "run_id INTEGER PRIMARY KEY", "policy TEXT NOT NULL")),
    (
        13,
        _create(
            "ledger_observations",
            "id     INTEGER PRIMARY KEY",
            "run_id INTEGER NOT NULL",
            "step   INTEGER NOT NULL",
            "kind   TEXT NOT NULL",
            "target TEXT",
            "text   TEXT NOT NULL",
        ),
    ),
    (7, _STAMP),
)


def _tagged_statements(release: str) -> list[tuple[int, str]]:
    """Return release X's open statements, each with the minor release that introduced it."""
    m = _minor(release)
    runs = _RUNS_0_3 if m >= 3 else _RUNS_0_1
    steps = _STEPS_0_2 if m >= 2 else _STEPS_0_1
    return [(1, runs), (1, steps), *((v, s) for v, s in _LATER if v <= m)]


def open_statements(release: str) -> list[str]:
    """Return the SQL statements release X's `Store::from_conn` runs on open, in order.

    The last one from 0.7 on is the `user_version` stamp, which upstream runs only when the
    stored version is below 7 (it reads `PRAGMA user_version` first; that read changes
    nothing and is not listed).
    """
    return [sql for _, sql in _tagged_statements(release)]


def torn_points(release: str) -> list[int]:
    """Return the kill points k (statements run) that leave a store torn between X-1 and X.

    A point follows a statement that changes a store of the previous release (a new table,
    a new column, the first `user_version` stamp) and precedes another such statement.
    """
    m = _minor(release)
    changing = [k for k, (v, _) in enumerate(_tagged_statements(release), 1) if v == m]
    return changing[:-1]


def is_file_connection(conn: sqlite3.Connection) -> bool:
    """Tell whether the connection's main database is a file (not `:memory:` or temp)."""
    return any(row[1] == "main" and row[2] for row in conn.execute("PRAGMA database_list"))


def new_sqlite(path: Path, release: str, *statements: str) -> None:
    """A store with `release`'s shape as upstream's open leaves it, plus rows inserted raw."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        open_as(conn, release, file=True)
        for sql in statements:
            conn.execute(sql)


def open_as(
    conn: sqlite3.Connection,
    release: str,
    *,
    stop_after: int | None = None,
    file: bool | None = None,
) -> None:
    """Run release X's open on `conn` the way upstream does: each statement in autocommit.

    An ALTER's "duplicate column name" error is ignored as upstream ignores it. From 0.12, a
    file store first gets `busy_timeout` and WAL as `Store::open` sets them (`file=None`
    detects a file connection; pass a bool to force). `stop_after=k` runs only the first k
    open statements, as if the process were killed there (the pragmas still run).
    """
    tagged = _tagged_statements(release)
    if file is None:
        file = is_file_connection(conn)
    previous = conn.isolation_level
    conn.isolation_level = None
    try:
        if _minor(release) >= 12 and file:
            for pragma in FILE_PRAGMAS:
                conn.execute(pragma).fetchall()
        for _, sql in tagged[:stop_after]:
            if sql == _STAMP:
                if conn.execute("PRAGMA user_version").fetchone()[0] < CHECKPOINT_FORMAT:
                    conn.execute(sql)
            elif sql.startswith("ALTER TABLE"):
                try:
                    conn.execute(sql)
                except sqlite3.OperationalError as exc:
                    if "duplicate column name" not in str(exc):
                        raise
            else:
                conn.execute(sql)
    finally:
        conn.isolation_level = previous


@dataclass
class WrittenRows:
    """What `write_rows` wrote: the keys to read it back by, and the texts stored verbatim."""

    releases: list[str] = field(default_factory=list)
    run_ids: list[int] = field(default_factory=list)
    roots: list[int] = field(default_factory=list)
    pending_ids: list[int] = field(default_factory=list)
    spawn_keys: list[tuple[int, int, str]] = field(default_factory=list)
    memory_keys: list[tuple[str, str]] = field(default_factory=list)
    evicted: list[tuple[str, str]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    def merge(self, other: WrittenRows) -> None:
        """Append another call's rows, so a lineage reports everything it wrote."""
        self.releases += other.releases
        self.run_ids += other.run_ids
        self.roots += other.roots
        self.pending_ids += other.pending_ids
        self.spawn_keys += other.spawn_keys
        self.memory_keys += [k for k in other.memory_keys if k not in self.memory_keys]
        self.evicted += other.evicted
        self.texts += [t for t in other.texts if t not in self.texts]


_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ','now')"
_STEP_INSERT = (
    "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)


@dataclass
class _Step:
    """One `StepRecord` as a release's `record` would write it."""

    step: int
    decision: str
    result: str
    prompt: str = ""
    tool_call: str = ""
    tokens: int = 0


class _Store:
    """The write methods of one release's `Store`, with that release's SQL."""

    def __init__(self, conn: sqlite3.Connection, minor: int) -> None:
        self.conn = conn
        self.m = minor

    def _x(self, sql: str, *args: Any) -> int:
        """Execute one autocommit statement and return the last inserted rowid."""
        return int(self.conn.execute(sql, args).lastrowid or 0)

    def start_run(self, goal: str, file: str) -> int:
        """Insert a root run (0.7+: status 'running' and a clock `started_at`)."""
        if self.m >= 7:
            sql = (
                "INSERT INTO runs (goal, file, status, started_at) "
                f"VALUES (?, ?, 'running', {_NOW})"
            )
            return self._x(sql, goal, file)
        return self._x("INSERT INTO runs (goal, file) VALUES (?, ?)", goal, file)

    def start_child_run(self, goal: str, file: str, parent: int, depth: int) -> int:
        """Insert a child run under `parent` at `depth` (0.5+)."""
        if self.m >= 7:
            sql = (
                "INSERT INTO runs (goal, file, parent_run_id, depth, status, started_at) "
                f"VALUES (?, ?, ?, ?, 'running', {_NOW})"
            )
        else:
            sql = "INSERT INTO runs (goal, file, parent_run_id, depth) VALUES (?, ?, ?, ?)"
        return self._x(sql, goal, file, parent, depth)

    def set_provider(self, run_id: int, provider: str) -> None:
        """Record which provider ran the run (0.3+)."""
        self._x("UPDATE runs SET provider = ? WHERE id = ?", provider, run_id)

    def record(self, run_id: int, s: _Step) -> None:
        """Insert one step row (0.1: decision and result only)."""
        if self.m == 1:
            sql = "INSERT INTO steps (run_id, step, decision, result) VALUES (?, ?, ?, ?)"
            self._x(sql, run_id, s.step, s.decision, s.result)
        else:
            args = (run_id, s.step, s.decision, s.result, s.prompt, s.tool_call, s.tokens)
            self._x(_STEP_INSERT, *args)

    def checkpoint_step(self, run_id: int, s: _Step) -> None:
        """Write the step and its checkpoint event in one transaction from 0.7, else record."""
        if self.m < 7:
            self.record(run_id, s)
            return
        self.conn.execute("BEGIN")
        args = (run_id, s.step, s.decision, s.result, s.prompt, s.tool_call, s.tokens)
        self.conn.execute(_STEP_INSERT, args)
        self.conn.execute(
            "INSERT INTO checkpoint_events (run_id, step, kind, detail) "
            "VALUES (?, ?, 'checkpoint', NULL)",
            (run_id, s.step),
        )
        self.conn.execute("COMMIT")

    def finish_run(self, run_id: int, outcome: str) -> None:
        """Set the outcome; 0.7+ derives the status, 0.12+ writes the run's summary."""
        if self.m < 7:
            self._x("UPDATE runs SET outcome = ? WHERE id = ?", outcome, run_id)
            return
        status = "paused" if outcome == "awaiting_approval" else "completed"
        self._x("UPDATE runs SET outcome = ?, status = ? WHERE id = ?", outcome, status, run_id)
        if self.m >= 12 and status == "completed":
            finished_at, ms = self.conn.execute(
                f"SELECT {_NOW}, (julianday('now') - julianday(started_at)) * 86400000.0 "
                "FROM runs WHERE id = ?",
                (run_id,),
            ).fetchone()
            duration = None if ms is None else int(max(ms, 0.0))
            steps = self.conn.execute(
                "SELECT COALESCE(MAX(step), 0) FROM steps WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            tokens = self.conn.execute(
                "SELECT COALESCE(SUM(tokens), 0) FROM steps WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            self._x(
                "INSERT OR REPLACE INTO run_outcomes "
                "(run_id, outcome, success, steps, tokens, duration_ms, finished_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                run_id,
                outcome,
                int(outcome == "success"),
                steps,
                tokens,
                duration,
                finished_at,
            )

    def record_event(
        self,
        run_id: int,
        step: int,
        kind: str,
        act: str,
        target: str,
        rule: str | None = None,
        layer: str | None = None,
        decision: str | None = None,
        source: str | None = None,
        performed: str | None = None,
    ) -> None:
        """Insert one policy refusal or decision (0.4+)."""
        self._x(
            "INSERT INTO policy_events "
            "(run_id, step, kind, act, target, rule, layer, decision, source, performed) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            run_id,
            step,
            kind,
            act,
            target,
            rule,
            layer,
            decision,
            source,
            performed,
        )

    def put_pending(
        self, run_id: int, step: int, act: str, target: str, content: str | None
    ) -> int:
        """Persist an action awaiting a human and return its request id (0.4+)."""
        sql = (
            "INSERT INTO pending_approvals (run_id, step, act, target, content) "
            "VALUES (?, ?, ?, ?, ?)"
        )
        return self._x(sql, run_id, step, act, target, content)

    def resolve_pending(self, request_id: int, decision: str) -> None:
        """Mark a pending action decided (0.4+)."""
        self._x("UPDATE pending_approvals SET resolved = ? WHERE id = ?", decision, request_id)

    def agent_event(
        self,
        run_id: int,
        step: int,
        kind: str,
        child: int | None,
        detail: str | None,
        tokens: int | None,
        remaining: int | None,
    ) -> None:
        """Insert a spawn, refusal or budget draw of an agent tree (0.5+)."""
        self._x(
            "INSERT INTO agent_events "
            "(run_id, step, kind, child_run_id, detail, tokens, remaining) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            run_id,
            step,
            kind,
            child,
            detail,
            tokens,
            remaining,
        )

    def sandbox_event(
        self, run_id: int, step: int, kind: str, backend: str | None, detail: str | None
    ) -> None:
        """Insert one sandbox lifecycle event (0.6+)."""
        sql = (
            "INSERT INTO sandbox_events (run_id, step, kind, backend, detail) "
            "VALUES (?, ?, ?, ?, ?)"
        )
        self._x(sql, run_id, step, kind, backend, detail)

    def checkpoint_event(self, run_id: int, step: int, kind: str, detail: str | None) -> None:
        """Insert a resume or skipped marker not tied to a step commit (0.7+)."""
        sql = "INSERT INTO checkpoint_events (run_id, step, kind, detail) VALUES (?, ?, ?, ?)"
        self._x(sql, run_id, step, kind, detail)

    def set_status(self, run_id: int, status: str) -> None:
        """Set the durable run status (0.7+)."""
        self._x("UPDATE runs SET status = ? WHERE id = ?", status, run_id)

    def record_spawn(
        self,
        parent: int,
        step: int,
        child: int,
        goal: str,
        verify_file: str,
        needle: str,
        max_steps: int | None,
        deny_write: str,
    ) -> None:
        """Persist a spawned child's contract for a tree resume (0.7+)."""
        self._x(
            "INSERT INTO spawns (parent_run_id, step, child_run_id, goal, verify_file, "
            "needle, max_steps, deny_write) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            parent,
            step,
            child,
            goal,
            verify_file,
            needle,
            max_steps,
            deny_write,
        )

    def record_mcp(
        self,
        run_id: int,
        step: int,
        kind: str,
        server: str,
        tool: str | None,
        ok: bool | None,
        millis: int | None,
        detail: str | None,
    ) -> None:
        """Insert one MCP conversation event (0.8+)."""
        self._x(
            "INSERT INTO mcp_events (run_id, step, kind, server, tool, ok, millis, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            run_id,
            step,
            kind,
            server,
            tool,
            None if ok is None else int(ok),
            millis,
            detail or None,  # McpEvent::with_detail drops an empty note
        )

    def memory_put(self, ws: str, key: str, value: str, run_id: int, step: int) -> list[str]:
        """Upsert one entry (cut to 2,000 chars with a marker), then evict to the caps."""
        marker = "…[truncated]"
        if len(value) > 2000:
            value = value[: 2000 - len(marker)] + marker
        self._x(
            "INSERT INTO memory (workspace, key, value, run_id, step, created_at) "
            f"VALUES (?, ?, ?, ?, ?, {_NOW}) "
            "ON CONFLICT(workspace, key) DO UPDATE SET value = excluded.value, "
            "run_id = excluded.run_id, step = excluded.step, created_at = excluded.created_at",
            ws,
            key,
            value,
            run_id,
            step,
        )
        rows = self.conn.execute(
            "SELECT key, LENGTH(value) FROM memory WHERE workspace = ? "
            "ORDER BY created_at ASC, id ASC",
            (ws,),
        ).fetchall()
        count, chars, evicted = len(rows), sum(n for _, n in rows), []
        for k, n in rows:
            if count <= 64 and chars <= 16_000:
                break
            if k == key:
                continue
            self._x("DELETE FROM memory WHERE workspace = ? AND key = ?", ws, k)
            count, chars = count - 1, chars - n
            evicted.append(k)
        return evicted

    def context_event(
        self, run_id: int, step: int, kind: str, detail: str | None, est: int | None = None
    ) -> None:
        """Insert one context-assembly event (0.10+)."""
        self._x(
            "INSERT INTO context_events "
            "(run_id, step, kind, detail, est_tokens, reported_tokens) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            run_id,
            step,
            kind,
            detail,
            est,
            None,
        )

    def context_reported(self, run_id: int, step: int, reported: int) -> None:
        """Fill in the provider-reported tokens of a step's assembled row (0.10+)."""
        self._x(
            "UPDATE context_events SET reported_tokens = ? "
            "WHERE run_id = ? AND step = ? AND kind = 'assembled'",
            reported,
            run_id,
            step,
        )

    def record_run_policy(self, run_id: int, policy: Mapping[str, Any]) -> None:
        """Store the run's policy as compact serde-style JSON, replacing any (0.13+)."""
        text = _json(policy)
        self._x("INSERT OR REPLACE INTO run_policies (run_id, policy) VALUES (?, ?)", run_id, text)

    def record_observations(
        self, run_id: int, entries: Sequence[tuple[int, str, str | None, str]]
    ) -> None:
        """Append ledger rows in one transaction; an empty batch writes nothing."""
        if not entries:
            return
        self.conn.execute("BEGIN")
        self.conn.executemany(
            "INSERT INTO ledger_observations (run_id, step, kind, target, text) "
            "VALUES (?, ?, ?, ?, ?)",
            [(run_id, *e) for e in entries],
        )
        self.conn.execute("COMMIT")


def _json(value: object) -> str:
    """Serialise like serde_json: compact, non-ASCII kept as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _policy(
    *layers: tuple[str, list[tuple[str, str, str]]],
    defaults: tuple[str, str, str, str] = ("allow", "ask", "ask", "deny"),
) -> dict[str, Any]:
    """Build a `Policy` as serde renders it: layers of (act, effect, pattern) rules."""
    read, write, exec_, net = defaults
    return {
        "layers": [
            {"name": n, "rules": [{"act": a, "effect": e, "pattern": p} for a, e, p in rules]}
            for n, rules in layers
        ],
        "defaults": {"read": read, "write": write, "exec": exec_, "net": net},
    }


def long_text(seed: int = 0) -> str:
    """Return the ~100 KB mixed-script text `write_rows` stores in one step result."""
    unit = f"seed {seed}: ascii é 🦀 日本 \u05e9 '\" ;--\n"
    return (unit * (LONG_TEXT_CHARS // len(unit) + 1))[:LONG_TEXT_CHARS]


def write_rows(conn: sqlite3.Connection, release: str, seed: int = 0) -> WrittenRows:
    """Write a realistic run history the way release X's `Store` methods write it.

    Only X's tables and columns are touched. Values are deterministic from (seed, release)
    except SQLite clock stamps. From 0.7 the oldest still-running run is resumed and finished.
    """
    m = _minor(release)
    rng = random.Random(f"io-harness-legacy:{seed}:{release}")
    awkward = list(AWKWARD)
    rng.shuffle(awkward)
    cycle: Iterator[str] = itertools.cycle(awkward)
    out = WrittenRows(releases=[release])

    def nxt() -> str:
        text = next(cycle)
        if text not in out.texts:
            out.texts.append(text)
        return text

    s = _Store(conn, m)
    previous = conn.isolation_level
    conn.isolation_level = None
    try:
        _write(s, m, release, seed, rng, nxt, out)
    finally:
        conn.isolation_level = previous
    return out


def _write(
    s: _Store,
    m: int,
    release: str,
    seed: int,
    rng: random.Random,
    nxt: Callable[[], str],
    out: WrittenRows,
) -> None:
    """Write the rows for `write_rows` (split out to keep the setup readable)."""
    tag = f"[{release} seed {seed}]"
    # Prompt and tool call are stored from 0.2; before that a step has no place for them.
    trace: Callable[[], str] = nxt if m >= 2 else str
    resumable: list[int] = []
    if m >= 7:
        resumable = [
            r[0]
            for r in s.conn.execute(
                "SELECT id FROM runs WHERE outcome IS NULL AND status = 'running' "
                "ORDER BY id LIMIT 1"
            )
        ]

    # Run A: a root that succeeds, with a retry sharing step 2 (retries exist from 0.2).
    a = s.start_run(f"write out.txt {tag} {nxt()}", "out.txt")
    out.run_ids.append(a)
    out.roots.append(a)
    if m >= 3:
        s.set_provider(a, f"anthropic {nxt()}")
    # Texts inside JSON are escaped there, so they come from `rng`, not the verbatim cycle.
    tool_call = _json({"content": rng.choice(AWKWARD)}) if m >= 2 else ""
    s.checkpoint_step(a, _Step(1, "wrote file", nxt(), trace(), tool_call, 128))
    if m >= 2:
        s.record(a, _Step(2, "retry 1 after error", nxt(), trace(), "", 7))
    s.checkpoint_step(a, _Step(2, "verified", nxt(), "", "", BIG))
    s.checkpoint_step(a, _Step(3, nxt(), "", "", "", 0))

    # Run B: paused awaiting approval (a plain capped run before 0.4).
    b = s.start_run(nxt(), nxt())
    out.run_ids.append(b)
    out.roots.append(b)
    s.checkpoint_step(b, _Step(1, "asked to write", nxt(), "p", "{}", 3))

    # Run C: crashed mid-run, holding the ~100 KB result; stays running.
    c = s.start_run("", f"crash.txt {tag}")
    out.run_ids.append(c)
    out.roots.append(c)
    s.checkpoint_step(c, _Step(1, "read file", long_text(seed), trace(), "", 2**40))

    if m >= 4:
        s.record_event(a, 1, "refusal", "read", ".env", ".env", "builtin-secrets")
        s.record_event(a, 1, "refusal", "write", nxt())
        s.record_event(
            a, 2, "decision", "write", "out.txt", "*.txt", nxt(), "approve", "cli", nxt()
        )
        if m >= 8:
            s.record_event(a, 2, "refusal", "net", "api.example.com:443", None, None)
        p1 = s.put_pending(b, 1, "write", "src/a.rs", nxt())
        s.record_event(b, 1, "decision", "write", "src/a.rs", None, None, "defer", "cli")
        p2 = s.put_pending(b, 1, "exec", f"cargo test {nxt()}", None)
        s.resolve_pending(p2, "deny")
        out.pending_ids += [p1, p2]
        s.finish_run(b, "awaiting_approval")
    else:
        s.finish_run(b, "step_cap_reached")

    if m >= 5:
        g1 = nxt()
        c1 = s.start_child_run(g1, "child.txt", a, 1)
        gc = s.start_child_run(f"grandchild {tag}", "g.txt", c1, 2)
        g2 = nxt()
        c2 = s.start_child_run(g2, nxt(), a, 1)
        out.run_ids += [c1, gc, c2]
        s.agent_event(a, 2, "spawn", c1, g1, None, None)
        s.agent_event(a, 2, "spawn", c2, g2, None, None)
        s.agent_event(c1, 1, "spawn", gc, f"grandchild {tag}", None, None)
        s.agent_event(a, 3, "spawn_refused", None, "max_depth", None, None)
        s.agent_event(c1, 1, "budget_draw", None, None, BIG, 2**62)
        s.agent_event(gc, 1, "budget_draw", None, None, 0, 0)
        if m >= 7:
            deny = _json(["secrets/*", rng.choice(AWKWARD)])
            s.record_spawn(a, 2, c1, g1, "child.txt", nxt(), 8, deny)
            s.record_spawn(a, 2, c2, g2, "c2.txt", "", None, "[]")
            s.record_spawn(c1, 1, gc, f"grandchild {tag}", "g.txt", "done", 3, '["*"]')
            out.spawn_keys += [(a, 2, g1), (a, 2, g2), (c1, 1, f"grandchild {tag}"), (a, 9, "none")]
        s.checkpoint_step(c1, _Step(1, "spawned", nxt(), trace(), "", 1000))
        s.checkpoint_step(gc, _Step(1, "wrote file", "done", "", "", BIG))
        s.checkpoint_step(c2, _Step(1, "read file", nxt(), "", "", 5))
        s.finish_run(gc, "success")
        s.finish_run(c1, "budget_ceiling_reached")

    if m >= 6:
        backend = "macos-sandbox-exec"
        s.sandbox_event(a, 1, "create", backend, None)
        s.sandbox_event(a, 1, "exec", backend, f"rustc --edition 2021 {nxt()}")
        s.sandbox_event(a, 2, "cap_hit", None, "memory")
        s.sandbox_event(a, 3, "destroy", None, None)
        if m >= 9:
            s.sandbox_event(a, 3, "gate_phase_failed", None, "criterion-compile")

    if m >= 7:
        s.checkpoint_event(a, 1, "skipped", None)
        s.checkpoint_event(a, 2, "resume", nxt())
        f = s.start_run(f"failed run {tag}", "f.txt")
        out.run_ids.append(f)
        out.roots.append(f)
        s.set_status(f, "failed")
        for old in resumable:
            last = s.conn.execute(
                "SELECT COALESCE(MAX(step), 0) FROM steps WHERE run_id = ?", (old,)
            ).fetchone()[0]
            s.checkpoint_event(old, last + 1, "resume", f"resumed by {release}")
            s.checkpoint_event(old, last, "skipped", None)
            s.checkpoint_step(old, _Step(last + 1, "resumed", nxt(), "", "", 11))
            s.finish_run(old, "success")

    if m >= 8:
        s.record_mcp(a, 0, "connected", "fs", None, None, 12, "stdio")
        s.record_mcp(a, 0, "discovered", "fs", "fs__read", None, None, None)
        s.record_mcp(a, 1, "called", "fs", "fs__read", True, BIG, None)
        s.record_mcp(a, 2, "called", nxt(), "fs__write", False, 0, nxt())
        s.record_mcp(a, 3, "disconnected", "fs", None, None, None, "")

    if m >= 10:
        ws0, ws1 = WORKSPACES
        keys = [(ws0, "build"), (ws0, "long"), (ws0, nxt()), (ws0, ""), (ws0, f"note {release}")]
        s.memory_put(ws0, "build", "cargo build --release", a, 1)
        s.memory_put(ws0, "long", long_text(seed), a, 2)
        s.memory_put(keys[2][0], keys[2][1], nxt(), a, 2)
        s.memory_put(ws0, "", "", a, 1)
        s.memory_put(ws0, f"note {release}", nxt(), a, 3)
        s.memory_put(ws0, "build", f"cargo build (overwritten by {release})", a, 3)
        evicted: list[str] = []
        # ws1 only ever gains fresh keys, so its (created_at, id) order, and thus what the
        # caps evict, is the insertion order whatever the clock does.
        for i in range(9):  # 9 x 1,990 chars breaks the 16,000-char cap: evicts oldest first
            key = f"fill {release} {i}"
            keys.append((ws1, key))
            evicted += s.memory_put(ws1, key, (f"{i} {tag} ünï " * 200)[:1990], a, 3)
        out.evicted += [(ws1, k) for k in evicted]
        out.memory_keys += [k for k in keys if k not in out.memory_keys]
        s.context_event(a, 1, "assembled", "carried=3 stubbed=5 reread=1", BIG)
        s.context_reported(a, 1, BIG + 2)
        s.context_event(a, 2, "reread", nxt())
        s.context_event(a, 2, "reread_refused", ".env: denied by policy")
        s.context_event(a, 3, "memory_write", "build")
        s.context_event(a, 3, "memory_evict", ", ".join(evicted))
        s.context_event(a, 1, "memory_recall", nxt())
        if m >= 11:
            s.context_event(a, 2, "served", "openai")
            s.context_event(a, 3, "stalled", nxt())
        if m >= 12:
            s.context_event(a, 3, "replan", nxt())

    if m >= 13:
        base = ("builtin-secrets", [("read", "deny", ".env"), ("write", "deny", ".env")])
        s.record_run_policy(a, _policy(defaults=("allow",) * 4))  # permissive, then replaced
        s.record_run_policy(a, _policy(base, ("base", [("read", "allow", rng.choice(AWKWARD))])))
        s.record_run_policy(
            c,
            _policy(
                ("exec", [("exec", "allow", "cargo")]), defaults=("allow", "deny", "ask", "ask")
            ),
        )
        kinds = list(OBS_KINDS)
        rng.shuffle(kinds)
        entries = [
            (1 + i // 4, k, None if k in ("message", "error") else nxt(), nxt())
            for i, k in enumerate(kinds)
        ]
        s.record_observations(a, entries)
        s.record_observations(a, [])

    # The crashed run C got further before dying: its later steps hold every awkward text
    # not written yet, so each call stores all of them.
    for k, text in enumerate((t for t in AWKWARD if t not in out.texts), start=2):
        out.texts.append(text)
        s.checkpoint_step(c, _Step(k, text, text, text, "", k))
    s.finish_run(a, "success")
    s.finish_run(a, "success")  # a finished run resumed again: idempotent (replaces at 0.12+)


def _connect(path: str | Path) -> sqlite3.Connection:
    """Open a file like a new upstream process would (no implicit transactions).

    `synchronous = OFF` only skips fsyncs (about 6x faster builds); it is not stored in the
    file and changes nothing a store holds.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    return conn


def build_born_at(path: str | Path, release: str, seed: int = 0) -> WrittenRows:
    """Create a file store with release X's open, then write rows as X; `path` should not exist."""
    conn = _connect(path)
    try:
        open_as(conn, release, file=True)
        return write_rows(conn, release, seed)
    finally:
        conn.close()


def build_lineage(path: str | Path, release: str, seed: int = 0) -> WrittenRows:
    """Grow a file store from 0.1 to X: each release opens it (its own process) and writes rows."""
    out = WrittenRows()
    for r in RELEASES[: _minor(release)]:
        out.merge(build_born_at(path, r, seed))
    return out


def build_torn(path: str | Path, release: str, stop_after: int, seed: int = 0) -> WrittenRows:
    """Build the lineage store of the release before X, then run X's open killed after k.

    `k` (`stop_after`) counts X's open statements; see `torn_points` for the interesting ones.
    """
    m = _minor(release)
    out = build_lineage(path, RELEASES[m - 2], seed) if m > 1 else WrittenRows()
    conn = _connect(path)
    try:
        open_as(conn, release, stop_after=stop_after, file=True)
    finally:
        conn.close()
    return out


def user_tables(conn: sqlite3.Connection) -> list[str]:
    """Return the user tables, sorted, without SQLite's own tables and `alembic_version`."""
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
        "ESCAPE '\\' AND name != 'alembic_version' ORDER BY name"
    )
    return [r[0] for r in rows]


def _quote(name: str) -> str:
    """Quote an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def column_names(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """Return each user table's column names in table order."""
    return {
        t: [r[1] for r in conn.execute(f"PRAGMA table_info({_quote(t)})")]
        for t in user_tables(conn)
    }


def table_shapes(conn: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Return `PRAGMA table_info` per user table as (name, type, notnull, dflt_value, pk)."""
    return {
        t: [tuple(r[1:6]) for r in conn.execute(f"PRAGMA table_info({_quote(t)})")]
        for t in user_tables(conn)
    }


def create_texts(conn: sqlite3.Connection) -> dict[str, str]:
    """Return each user table's CREATE text as stored in `sqlite_master`."""
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
    tables = set(user_tables(conn))
    return {name: sql for name, sql in rows if name in tables}


def dump(
    conn: sqlite3.Connection,
    columns: Mapping[str, Sequence[str]] | None = None,
    *,
    typed: bool = False,
) -> dict[str, list[tuple[Any, ...]]]:
    """Return every user table's rows ordered by primary key (else rowid).

    `columns` restricts the dump to those tables and columns (e.g. `column_names` of the store
    before an upgrade), so rows compare across an upgrade that adds columns. `typed=True`
    pairs each value with its SQLite storage class, so 1, 1.0 and '1' differ.
    """
    out: dict[str, list[tuple[Any, ...]]] = {}
    for table in user_tables(conn) if columns is None else list(columns):
        info = list(conn.execute(f"PRAGMA table_info({_quote(table)})"))
        names = [r[1] for r in info] if columns is None else list(columns[table])
        pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
        order = ", ".join(_quote(c) for c in pk) if pk else "rowid"
        if typed:
            cols = ", ".join(f"typeof({_quote(c)}), {_quote(c)}" for c in names)
        else:
            cols = ", ".join(_quote(c) for c in names)
        rows = conn.execute(f"SELECT {cols} FROM {_quote(table)} ORDER BY {order}").fetchall()
        if typed:
            rows = [tuple(zip(r[::2], r[1::2], strict=True)) for r in rows]
        out[table] = [tuple(r) for r in rows]
    return out


# Release X's read methods: (name, since minor, probe kind, SQL). Probes: run, pending,
# spawn, workspace, memory, none. `?` stands for upstream's numbered parameters, in order.
_READS: tuple[tuple[str, int, str, str], ...] = (
    ("steps", 2, "run", "SELECT step, decision, result, prompt, tool_call, tokens FROM steps "
     "WHERE run_id = ? ORDER BY step ASC, id ASC"),
    ("last_step", 2, "run", "SELECT COALESCE(MAX(step), 0) FROM steps WHERE run_id = ?"),
    ("provider", 3, "run", "SELECT provider FROM runs WHERE id = ?"),
    ("events", 4, "run", "SELECT step, kind, act, target, rule, layer, decision, source, "
     "performed FROM policy_events WHERE run_id = ? ORDER BY id ASC"),
    ("pending", 4, "pending", "SELECT id, run_id, step, act, target, content, resolved "
     "FROM pending_approvals WHERE id = ?"),
    ("agent_events", 5, "run", "SELECT run_id, step, kind, child_run_id, detail, tokens, "
     "remaining FROM agent_events WHERE run_id = ? ORDER BY id ASC"),
    ("children", 5, "run", "SELECT id FROM runs WHERE parent_run_id = ? ORDER BY id ASC"),
    ("parent", 5, "run", "SELECT parent_run_id FROM runs WHERE id = ?"),
    ("depth", 5, "run", "SELECT depth FROM runs WHERE id = ?"),
    ("sandbox_events", 6, "run", "SELECT run_id, step, kind, backend, detail "
     "FROM sandbox_events WHERE run_id = ? ORDER BY id ASC"),
    ("checkpoint_events", 7, "run", "SELECT run_id, step, kind, detail "
     "FROM checkpoint_events WHERE run_id = ? ORDER BY id ASC"),
    ("status", 7, "run", "SELECT status FROM runs WHERE id = ?"),
    ("outcome", 7, "run", "SELECT outcome FROM runs WHERE id = ?"),
    ("spent_tokens", 7, "run", "SELECT COALESCE(SUM(tokens), 0) FROM steps WHERE run_id = ?"),
    ("tree_run_ids", 7, "run", "WITH RECURSIVE tree(id) AS (SELECT id FROM runs WHERE id = ? "
     "UNION ALL SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id) "
     "SELECT id FROM tree ORDER BY id ASC"),
    ("spent_tokens_tree", 7, "run", "WITH RECURSIVE tree(id) AS (SELECT id FROM runs "
     "WHERE id = ? UNION ALL SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id) "
     "SELECT COALESCE(SUM(s.tokens), 0) FROM steps s JOIN tree ON s.run_id = tree.id"),
    ("agent_count_tree", 7, "run", "WITH RECURSIVE tree(id) AS (SELECT id FROM runs "
     "WHERE id = ? UNION ALL SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id) "
     "SELECT COUNT(*) FROM tree"),
    ("find_spawn", 7, "spawn", "SELECT child_run_id, goal, verify_file, needle, max_steps, "
     "deny_write FROM spawns WHERE parent_run_id = ? AND step = ? AND goal = ? "
     "ORDER BY id ASC LIMIT 1"),
    ("check_resumable", 7, "run", "SELECT 1 FROM runs WHERE id = ?"),
    ("mcp_events", 8, "run", "SELECT step, kind, server, tool, ok, millis, detail "
     "FROM mcp_events WHERE run_id = ? ORDER BY id ASC"),
    ("context_events", 10, "run", "SELECT step, kind, detail, est_tokens, reported_tokens "
     "FROM context_events WHERE run_id = ? ORDER BY id ASC"),
    ("memory_list", 10, "workspace", "SELECT key, value, run_id, step, created_at FROM memory "
     "WHERE workspace = ? ORDER BY created_at ASC, id ASC"),
    ("memory_get", 10, "memory", "SELECT key, value, run_id, step, created_at FROM memory "
     "WHERE workspace = ? AND key = ?"),
    ("runs", 11, "none", "SELECT id FROM runs ORDER BY id DESC"),
    ("run_summary", 12, "run", "SELECT run_id, outcome, success, steps, tokens, duration_ms, "
     "finished_at FROM run_outcomes WHERE run_id = ?"),
    ("run_policy", 13, "run", "SELECT policy FROM run_policies WHERE run_id = ?"),
    ("observations", 13, "run", "SELECT step, kind, target, text FROM ledger_observations "
     "WHERE run_id = ? ORDER BY id ASC"),
)  # fmt: skip
_STEPS_0_1_READ = "SELECT step, decision, result FROM steps WHERE run_id = ? ORDER BY step ASC"


def read_answers(
    conn: sqlite3.Connection, release: str, run_ids: Iterable[int] | WrittenRows
) -> dict[str, Any]:
    """Return the answers of release X's own read queries for the given runs.

    Keys are calls like ``"steps(3,)"``; values are the rows the query returns. Pass a
    `WrittenRows` to also probe its pending requests, spawns and memory keys (with bare run
    ids only `WORKSPACES` are listed). Tree reads treat every run as a root.
    `elapsed_secs` is clock-dependent and left out; `check_resumable` folds in
    `user_version`; `run_policy` is parsed JSON, as upstream deserialises it.
    """
    m = _minor(release)
    w = run_ids if isinstance(run_ids, WrittenRows) else WrittenRows(run_ids=list(run_ids))
    runs = sorted(set(w.run_ids))
    probes: dict[str, list[tuple[Any, ...]]] = {
        "run": [(r,) for r in runs],
        "pending": [(p,) for p in w.pending_ids],
        "spawn": list(dict.fromkeys(w.spawn_keys)),
        "workspace": [(ws,) for ws in WORKSPACES],
        "memory": list(dict.fromkeys(w.memory_keys + w.evicted)),
        "none": [()],
    }
    reads = [("steps", 1, "run", _STEPS_0_1_READ)] if m == 1 else []
    reads += [r for r in _READS if r[1] <= m]
    answers: dict[str, Any] = {}
    for name, _, probe, sql in reads:
        for args in probes[probe]:
            answer: Any = conn.execute(sql, args).fetchall()
            if name == "check_resumable":
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                answer = "newer format" if version > CHECKPOINT_FORMAT else answer == [(1,)]
            elif name == "run_policy":
                answer = [json.loads(row[0]) for row in answer]
            answers[f"{name}{args!r}"] = answer
    if m >= 11:
        answers["last_run()"] = answers["runs()"][:1]
    return answers
