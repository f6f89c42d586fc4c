"""Each release's read methods with their SQL, and `read_answers`: what a release's own reads
return on a store, to compare before and after an upgrade.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from .opens import CHECKPOINT_FORMAT, _minor
from .writes import WORKSPACES, WrittenRows

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
