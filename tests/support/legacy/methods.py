"""The write methods of one release's `Store` (`_Store`), each with that release's SQL and row
formats, and the values they write (JSON, policies).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
