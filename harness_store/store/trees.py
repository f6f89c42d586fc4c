"""Agent trees: parent edges, recursive aggregates, spawned-child contracts.

Trees follow `runs.parent_run_id` from a root. The recursive queries use `UNION` rather than
`UNION ALL`, so a corrupt store whose parent edges form a cycle ends the recursion instead of
hanging the reader; on a real tree the two give the same rows.
"""

from __future__ import annotations

from sqlalchemy import CTE, func, insert, select

from .. import models as m
from ..formats import i64, opt_u32, text, token_sum, u32
from ..records import SpawnRow, TreeNode
from .base import StoreBase


def tree_ids(root: int) -> CTE:
    """The ids of the tree rooted at `root`: the root and every descendant."""
    r = m.Run.__table__
    start = select(r.c.id).where(r.c.id == root).cte("tree", recursive=True)
    return start.union(select(r.c.id).join(start, r.c.parent_run_id == start.c.id))


class TreesMixin(StoreBase):
    """The tree half of upstream's Store, plus `tree`."""

    def children(self, run_id: int) -> list[int]:
        """Direct children of a run, in spawn order."""
        statement = select(m.Run.id).where(m.Run.parent_run_id == run_id).order_by(m.Run.id)
        return self._rows(statement, int)

    def parent(self, run_id: int) -> int | None:
        """The parent run id, or None for a root; `RunNotFoundError` for a missing run."""
        value = self._run_column(run_id, m.Run.parent_run_id, missing_ok=False)
        return None if value is None else int(value)

    def depth(self, run_id: int) -> int:
        """The nesting depth recorded for a run (0 at the root)."""
        return int(self._run_column(run_id, m.Run.depth, missing_ok=False))

    def tree_run_ids(self, root: int) -> list[int]:
        """Every run id in the tree rooted at `root`, ascending."""
        tree = tree_ids(root)
        return self._rows(select(tree.c.id).order_by(tree.c.id), int)

    def spent_tokens_tree(self, root: int) -> int:
        """Total tokens spent across the tree — the aggregate restored on a tree resume."""
        tree = tree_ids(root)
        statement = select(func.coalesce(func.sum(m.Step.tokens), 0)).join(
            tree, m.Step.run_id == tree.c.id
        )
        return token_sum(self._scalar(statement))

    def agent_count_tree(self, root: int) -> int:
        """Number of runs (agents) in the tree."""
        tree = tree_ids(root)
        return int(self._scalar(select(func.count()).select_from(tree)))

    def tree(self, root: int) -> list[TreeNode]:
        """Every run of the tree with parent, depth, status, outcome, steps and tokens — in
        one query, ordered by id. Empty when `root` does not exist."""
        tree = tree_ids(root)
        s = m.Step
        per_run = (
            select(
                s.run_id,
                func.max(s.step).label("steps"),
                func.sum(s.tokens).label("tokens"),
            )
            .join(tree, s.run_id == tree.c.id)
            .group_by(s.run_id)
            .subquery()
        )
        r = m.Run
        statement = (
            select(
                r.id,
                r.parent_run_id,
                r.depth,
                r.goal,
                r.status,
                r.outcome,
                func.coalesce(per_run.c.steps, 0),
                func.coalesce(per_run.c.tokens, 0),
                r.started_at,
            )
            .join(tree, r.id == tree.c.id)
            .outerjoin(per_run, per_run.c.run_id == r.id)
            .order_by(r.id)
        )

        def make(*row: object) -> TreeNode:
            values = list(row)
            values[6] = int(values[6])  # type: ignore[call-overload]
            values[7] = token_sum(values[7])
            return TreeNode(*values)  # type: ignore[arg-type]

        return self._rows(statement, make)

    # --- spawns --------------------------------------------------------------------------

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
    ) -> None:
        """Persist a spawned child's contract, so a replayed spawn step adopts the child."""
        with self._write() as conn:
            conn.execute(
                insert(m.Spawn).values(
                    parent_run_id=i64(parent_run_id, "parent_run_id"),
                    step=u32(step, "step"),
                    child_run_id=i64(child_run_id, "child_run_id"),
                    goal=text(goal, "goal"),
                    verify_file=text(verify_file, "verify_file"),
                    needle=text(needle, "needle"),
                    max_steps=opt_u32(max_steps, "max_steps"),
                    deny_write=text(deny_write_json, "deny_write_json"),
                )
            )

    def find_spawn(self, parent_run_id: int, step: int, goal: str) -> SpawnRow | None:
        """The child spawned by `parent_run_id` at `step` for `goal`, if any (the first one)."""
        s = m.Spawn
        statement = (
            select(s.child_run_id, s.goal, s.verify_file, s.needle, s.max_steps, s.deny_write)
            .where(s.parent_run_id == parent_run_id, s.step == step, s.goal == goal)
            .order_by(s.id)
            .limit(1)
        )
        rows = self._rows(statement, SpawnRow)
        return rows[0] if rows else None
