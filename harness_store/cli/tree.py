"""`harness-store tree`: the agent tree under a run."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from ..errors import RunNotFoundError
from .app import DbArg, JsonOpt, RunArg, SchemaOpt, app
from .output import JsonArray, fit_cell, plural, stdout_console, visible

if TYPE_CHECKING:
    from ..records import TreeNode
from .reader import in_schema, open_reader

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


GUIDES = ("    ", "│   ", "├── ", "└── ")
"""Rich's tree guides: below an ancestor with no more siblings, below one with more, a child
with siblings after it, the last child."""

DRAWN_LEVELS = 24
"""The levels of guides drawn before a run. A deeper run's line starts with `+N`, the number
of levels further left that are left out, so no line grows with the depth: a chain of spawns
10,000 deep is drawn in lines no wider than one 24 deep, in time and memory linear in its
runs (Rich's `Tree` drew each line's guides anew, quadratic in the depth)."""

LABEL_ROOM = 40
"""Cells a terminal line keeps for a run's label: on a narrow terminal fewer levels are drawn
(at 80 columns, 10), so a deep run's line is not all guides cut short."""


def drawn_levels(width: int | None) -> int:
    """The levels drawn on a terminal `width` cells wide (None: piped, `DRAWN_LEVELS`)."""
    if width is None:
        return DRAWN_LEVELS
    return max(1, min(DRAWN_LEVELS, (width - LABEL_ROOM) // len(GUIDES[0])))


def tree_lines(
    root: TreeNode, children: Mapping[int | None, list[TreeNode]], levels: int = DRAWN_LEVELS
) -> Iterator[tuple[TreeNode, str]]:
    """Each run of the tree under `root` with the guides drawn before it, depth first, each
    run's children in spawn order. Iterative, holding only the path to the current run. A run
    met twice (a damaged store's cycle) is drawn once."""
    yield root, ""
    seen = {root.run_id}

    def unseen(node: TreeNode) -> list[TreeNode]:
        kids = [c for c in children.get(node.run_id, []) if c.run_id not in seen]
        seen.update(c.run_id for c in kids)
        return kids

    more: list[bool] = []  # for each level above the current run: does it have siblings left
    pending: list[tuple[list[TreeNode], int]] = [(unseen(root), 0)]
    while pending:
        kids, index = pending[-1]
        if index == len(kids):
            pending.pop()
            if more:
                more.pop()
            continue
        pending[-1] = (kids, index + 1)
        node = kids[index]
        last = index == len(kids) - 1
        shown = more[max(0, len(more) - (levels - 1)) :]
        left_out = len(more) - len(shown)
        guides = "".join(GUIDES[1] if m else GUIDES[0] for m in shown)
        prefix = (f"+{left_out} " if left_out else "") + guides + GUIDES[3 if last else 2]
        yield node, prefix
        more.append(not last)
        pending.append((unseen(node), 0))


@app.command("tree")
def tree_command(
    db: DbArg, run: RunArg, as_json: JsonOpt = False, schema: SchemaOpt = None
) -> None:
    """The agent tree under RUN: each run's status, outcome, steps and tokens, and the tree's
    totals. A run more than 24 levels down (fewer on a narrow terminal) starts with +N, the
    levels left out of its guides. Read-only."""
    db = in_schema(db, schema)
    from rich.text import Text

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
        stream_json(run, totals, nodes, children)
        return
    root = next(n for n in nodes if n.run_id == run)
    console = stdout_console()
    out = sys.stdout
    levels = drawn_levels(console.width if console.is_terminal else None)
    for node, prefix in tree_lines(root, children, levels):
        line = prefix + visible(node_label(node))
        out.write((fit_cell(line, console.width) if console.is_terminal else line) + "\n")
    console.print(
        Text(
            f"{plural(totals['runs'], 'run')}, {plural(totals['steps'], 'step')}, "
            f"{plural(totals['tokens'], 'token')}",
            style="bold" if console.is_terminal else "",
        )
    )


def stream_json(
    run: int,
    totals: Mapping[str, int],
    nodes: list[TreeNode],
    children: Mapping[int | None, list[TreeNode]],
) -> None:
    """The tree as one JSON document, written a node at a time."""
    out = sys.stdout
    out.write("{\n")
    out.write(f'  "root": {run},\n')
    for key, value in totals.items():
        out.write(f"  {json.dumps(key)}: {value},\n")
    out.write(f'  "run_ids": {json.dumps([n.run_id for n in nodes])},\n')
    out.write('  "nodes": ')
    with JsonArray(out=out) as array:
        for n in nodes:
            array.add(
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
            )
    out.write("}\n")
