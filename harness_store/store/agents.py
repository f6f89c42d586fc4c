"""Agent trees: agent events, parent edges, recursive aggregates, spawned-child contracts.

Trees follow `runs.parent_run_id` from a root. The recursive queries use `UNION` rather than
`UNION ALL`, so a corrupt store whose parent edges form a cycle ends the recursion instead of
hanging the reader; on a real tree the two give the same rows.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property
from typing import Any

from sqlalchemy import CTE, Engine, bindparam, func, insert, literal, literal_column, select

from .. import models as m
from ..formats import i64, opt_text, opt_u32, opt_u64, text, token_sum, u32
from ..records import AgentEvent, SpawnRow, TreeNode
from .base import DriverStatement
from .marks import reads, writes
from .release_tables import OlderStoreMixin
from .unreadable import check_integers, integer_columns, integer_total, summing


def tree_ids(root: Any) -> CTE:
    """The ids of the tree rooted at `root`: the root and every descendant."""
    r = m.table_of(m.Run)
    start = select(r.c.id).where(r.c.id == root).cte("tree", recursive=True)
    return start.union(select(r.c.id).join(start, r.c.parent_run_id == start.c.id))


def tree_queries() -> dict[str, Any]:
    """The tree reads, with a `root` parameter, compiled once per Store.

    `tree` computes each run's steps and tokens in correlated subqueries: the planner then
    walks the tree and probes `steps(run_id, step)` per run. A join with GROUP BY lets SQLite
    avoid a sort by scanning every step in the store instead (150 ms on 2M steps vs 80 µs).
    """
    zero: Any = literal_column("0")
    tree = tree_ids(bindparam("root"))
    r = m.table_of(m.Run)
    s = m.table_of(m.Step)
    steps = select(func.coalesce(func.max(s.c.step), zero)).where(s.c.run_id == r.c.id)
    tokens = select(func.coalesce(func.sum(s.c.tokens), zero)).where(s.c.run_id == r.c.id)
    return {
        "ids": select(tree.c.id).order_by(tree.c.id),
        "tokens": select(func.coalesce(func.sum(s.c.tokens), zero)).join(
            tree, s.c.run_id == tree.c.id
        ),
        "count": select(func.count()).select_from(tree),
        "tree": select(
            r.c.id,
            r.c.parent_run_id,
            r.c.depth,
            r.c.goal,
            r.c.status,
            r.c.outcome,
            steps.scalar_subquery(),
            tokens.scalar_subquery(),
            r.c.started_at,
        )
        .select_from(tree.join(r, r.c.id == tree.c.id))
        .order_by(r.c.id),
        "mail": mailbox_query(tree),
    }


def mailbox_query(tree: CTE) -> Any:
    """Per run of the tree that has any: messages received, unread, children queued — three
    index probes per run (agent_messages_to, agent_queue_entry)."""
    zero: Any = literal_column("0")
    a = m.table_of(m.AgentMessage)
    q = m.table_of(m.AgentQueueEntry)
    messages = select(func.count()).where(a.c.to_run_id == tree.c.id).scalar_subquery()
    unread = (
        select(func.count())
        .where(a.c.to_run_id == tree.c.id, a.c.read_at.is_(None))
        .scalar_subquery()
    )
    queued = select(func.count()).where(q.c.parent_run_id == tree.c.id).scalar_subquery()
    found = select(
        tree.c.id, messages.label("messages"), unread.label("unread"), queued.label("queued")
    ).subquery()
    return select(found).where((found.c.messages > zero) | (found.c.queued > zero))


_TREE_STATEMENTS: dict[tuple[str, str, str], dict[str, DriverStatement]] = {}
"""The tree queries compiled once per dialect (name, driver, paramstyle), for every Store of
the process: compiling them was most of a Store's construction (about 12 of 18 ms), which
sync pays for each source it opens and each command for its store."""


TREE_INTEGERS = integer_columns(tree_queries()["tree"].selected_columns)
"""The integer columns of a `tree` row (its run's id, parent and depth), checked as read."""


def tree_statements(engine: Engine) -> dict[str, DriverStatement]:
    """The tree queries compiled for `engine`'s dialect (once per process)."""
    dialect = engine.dialect
    key = (dialect.name, dialect.driver, dialect.paramstyle)
    compiled = _TREE_STATEMENTS.get(key)
    if compiled is None:
        compiled = {
            name: DriverStatement.compile(query, engine) for name, query in tree_queries().items()
        }
        _TREE_STATEMENTS[key] = compiled
    return compiled


class AgentsMixin(OlderStoreMixin):
    """The tree half of upstream's Store, plus `tree`."""

    @cached_property
    def _tree_statements(self) -> dict[str, DriverStatement]:
        return tree_statements(self._engine)

    def _tree_read(self, name: str, root: int) -> list[Any]:
        return self._driver_read(self._tree_statements[name], {"root": root})

    @reads
    def children(self, run_id: int) -> list[int]:
        """Direct children of a run, in spawn order."""
        statement = select(m.Run.id).where(m.Run.parent_run_id == run_id).order_by(m.Run.id)
        return self._rows(statement, int)

    @reads
    def parent(self, run_id: int) -> int | None:
        """The parent run id, or None for a root; `RunNotFoundError` for a missing run."""
        value = self._run_column(run_id, m.Run.parent_run_id, missing_ok=False)
        return None if value is None else int(value)

    @reads
    def depth(self, run_id: int) -> int:
        """The nesting depth recorded for a run (0 at the root)."""
        return int(self._run_column(run_id, m.Run.depth, missing_ok=False))

    @reads
    def tree_run_ids(self, root: int) -> list[int]:
        """Every run id in the tree rooted at `root`, ascending."""
        return [int(row[0]) for row in self._tree_read("ids", root)]

    @reads
    def spent_tokens_tree(self, root: int) -> int:
        """Total tokens spent across the tree — the aggregate restored on a tree resume."""
        with summing():
            total = self._tree_read("tokens", root)[0][0]
        return integer_total(
            total,
            self._read,
            self._backend,
            [("steps", "tokens", m.Step.run_id.in_(select(tree_ids(root).c.id)))],
        )

    @reads
    def agent_count_tree(self, root: int) -> int:
        """Number of runs (agents) in the tree."""
        return int(self._tree_read("count", root)[0][0])

    @reads
    def tree(self, root: int) -> list[TreeNode]:
        """Every run of the tree with parent, depth, status, outcome, steps and tokens, and
        its mailbox (messages, unread) and queue (children waiting) — ordered by id. Empty
        when `root` does not exist."""
        rows = self._tree_read("tree", root)
        check_integers(rows, TREE_INTEGERS, 0)
        nodes = [
            TreeNode(r[0], r[1], r[2], r[3], r[4], r[5], *self._run_totals(r[0], r[6], r[7]), r[8])
            for r in rows
        ]
        if not nodes:
            return nodes
        mail, queue = self._tree_mailboxes(root)
        return [
            replace(
                n,
                messages=mail.get(n.run_id, (0, 0))[0],
                unread=mail.get(n.run_id, (0, 0))[1],
                queued=queue.get(n.run_id, 0),
            )
            if n.run_id in mail or n.run_id in queue
            else n
            for n in nodes
        ]

    def _run_totals(self, run_id: int, steps: Any, tokens: Any) -> tuple[int, int]:
        """A run's last step and token total as the tree read them, or `UnreadableValueError`
        naming a step row whose value is no integer."""
        if type(steps) is int and type(tokens) is int:
            return steps, token_sum(tokens)
        of_run = m.Step.run_id == run_id
        return (
            integer_total(steps, self._read, self._backend, [("steps", "step", of_run)]),
            integer_total(tokens, self._read, self._backend, [("steps", "tokens", of_run)]),
        )

    def _tree_mailboxes(self, root: int) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
        """Per run of the tree: (messages, unread) and queued children; empty for a store from
        before the mailbox (0.60) or the queue (0.32), which a read-only Store may read."""
        if not (not self._lacks("agent_messages") and not self._lacks("agent_queue")):
            return {}, {}
        mail: dict[int, tuple[int, int]] = {}
        queue: dict[int, int] = {}
        for run, messages, unread, queued in self._tree_read("mail", root):
            if messages:
                mail[int(run)] = (int(messages), int(unread))
            if queued:
                queue[int(run)] = int(queued)
        return mail, queue

    # --- spawns --------------------------------------------------------------------------

    @writes
    def record_spawn(
        self,
        parent_run_id: int,
        step: int,
        child_run_id: int,
        goal: str,
        verify_file: str,
        needle: str,
        max_steps: int | None,
        deny_write_json: str,
        as_name: str = "",
    ) -> None:
        """Persist a spawned child's contract, so a replayed spawn step adopts the child; with
        the name it was given in its tree (0.60, upstream's last argument; '' when unnamed)."""
        with self._write() as conn:
            conn.execute(
                insert(m.Spawn).values(
                    parent_run_id=parent_run_id,
                    step=u32(step, "step"),
                    child_run_id=child_run_id,
                    goal=text(goal, "goal"),
                    verify_file=text(verify_file, "verify_file"),
                    needle=text(needle, "needle"),
                    max_steps=opt_u32(max_steps, "max_steps"),
                    deny_write=text(deny_write_json, "deny_write_json"),
                    as_name=text(as_name, "as_name"),
                )
            )

    @reads
    def find_spawn(self, parent_run_id: int, step: int, goal: str) -> SpawnRow | None:
        """The child spawned by `parent_run_id` at `step` for `goal`, if any (the first one)."""
        s = m.Spawn
        # Before 0.60 (a read-only Store on an older store) a child has no name of its own.
        as_name = s.as_name if self._has_columns("spawns", "as_name") else literal("")
        statement = (
            select(
                s.child_run_id, s.goal, s.verify_file, s.needle, s.max_steps, s.deny_write, as_name
            )
            .where(s.parent_run_id == parent_run_id, s.step == step, s.goal == goal)
            .order_by(s.id)
            .limit(1)
        )
        rows = self._rows(statement, SpawnRow)
        return rows[0] if rows else None

    @writes
    def record_agent_event(self, e: AgentEvent) -> None:
        """Record a spawn, a refused spawn, or a budget draw against the tree."""
        self._append(
            m.AgentEvent,
            run_id=i64(e.run_id, "run_id"),
            step=u32(e.step, "step"),
            kind=text(e.kind, "kind"),
            child_run_id=None if e.child_run_id is None else i64(e.child_run_id, "child_run_id"),
            detail=opt_text(e.detail, "detail"),
            tokens=opt_u64(e.tokens, "tokens"),
            remaining=opt_u64(e.remaining, "remaining"),
        )

    @reads
    def agent_events(self, run_id: int) -> list[AgentEvent]:
        """Every agent event of a run, in order."""
        a = m.AgentEvent
        statement = (
            select(a.run_id, a.step, a.kind, a.child_run_id, a.detail, a.tokens, a.remaining)
            .where(a.run_id == run_id)
            .order_by(a.id)
        )
        return self._rows(statement, AgentEvent)
