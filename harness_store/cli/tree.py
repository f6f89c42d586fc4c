"""`harness-store tree`: the agent tree under a run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import (
    RunNotFoundError,
)

if TYPE_CHECKING:
    pass
    from rich.tree import Tree

    from ..records import TreeNode
from .app import DbArg, JsonOpt, RunArg, app
from .output import emit_json, plural, stdout_console, visible
from .reader import open_reader

# --- tree --------------------------------------------------------------------------------


def node_label(node: TreeNode) -> str:
    """One node of the drawn tree."""
    return (
        f"run {node.run_id}  {node.status}  {node.outcome or '—'}  {plural(node.steps, 'step')}  "
        f"{plural(node.tokens, 'token')}{mailbox(node)}  {node.goal}"
    )


def mailbox(node: TreeNode) -> str:
    """The agent's mailbox and queue, when it has either."""
    out = ""
    if node.messages:
        out += f"  mail {node.unread}/{node.messages} unread"
    if node.queued:
        out += f"  {node.queued} queued"
    return out


@app.command("tree")
def tree_command(db: DbArg, run: RunArg, as_json: JsonOpt = False) -> None:
    """The agent tree under RUN: each run's status, outcome, steps and tokens, and the tree's
    totals. Read-only."""
    from rich.text import Text
    from rich.tree import Tree

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
                        "messages": n.messages,
                        "unread": n.unread,
                        "queued": n.queued,
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
            f"{plural(totals['runs'], 'run')}, {plural(totals['steps'], 'step')}, "
            f"{plural(totals['tokens'], 'token')}",
            style="bold" if console.is_terminal else "",
        )
    )
