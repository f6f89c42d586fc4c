"""`harness-store memory`: a workspace's memory entries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    pass
    pass
from .app import DbArg, JsonOpt, SchemaOpt, app
from .output import Column, emit_json, emit_table, short_time, stderr_console, visible
from .reader import in_schema, open_reader

# --- memory ------------------------------------------------------------------------------


@app.command("memory")
def memory_command(
    db: DbArg,
    workspace: Annotated[str, typer.Argument(metavar="WORKSPACE", help="Workspace path.")],
    as_json: JsonOpt = False,
    schema: SchemaOpt = None,
) -> None:
    """A workspace's memory entries, oldest first: key, kind (fact or decision), whether it is
    pinned, value, the run and step that wrote it, when. Read-only."""
    db = in_schema(db, schema)
    from rich.text import Text

    with open_reader(db) as reader:
        entries = reader.store.memory_list(workspace)
        others: list[str] = []
        if not entries and not as_json:
            from ..store.listings import Listings

            others = Listings(reader.store).memory_workspaces()
    if as_json:
        emit_json(
            {
                "workspace": workspace,
                "entries": [
                    {
                        "key": e.key,
                        "kind": e.kind,
                        "pinned": e.pinned,
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
            Column("key", cut=True),
            Column("kind"),
            Column("pinned"),
            Column("run", "right"),
            Column("step", "right"),
            Column("created (UTC)"),
            Column("value", cut=True),
        ],
        [
            (
                e.key,
                e.kind,
                "pinned" if e.pinned else "",
                e.run_id,
                e.step,
                short_time(e.created_at),
                e.value,
            )
            for e in entries
        ],
    )
