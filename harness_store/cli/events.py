"""`harness-store events`: a store's durable event stream, and `--follow`, a live tail of it,
and `harness-store patch`: a run's change as a patch series."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import RunNotFoundError
from .app import EXIT_USAGE, MAX_INT, CliError, DbArg, JsonOpt, RunArg, SchemaOpt, app
from .output import visible
from .reader import in_schema, open_reader

if TYPE_CHECKING:
    from ..records import RunEvent


def line(cursor: int, event: RunEvent, *, as_json: bool) -> str:
    if as_json:
        return json.dumps({"cursor": cursor, "run_id": event.run_id, "step": event.step,
                           "depth": event.depth, "event": event.kind, **event.fields},
                          ensure_ascii=False)  # fmt: skip
    fields = json.dumps(event.fields, ensure_ascii=False) if event.fields else ""
    return visible(
        f"{cursor:>8}  run {event.run_id}  step {event.step}  depth {event.depth}  "
        f"{event.kind}  {fields}".rstrip()
    )


@app.command("events")
def events_command(
    db: DbArg,
    run: Annotated[
        int | None, typer.Option("--run", metavar="RUN", max=MAX_INT, help="Only this run.")
    ] = None,
    after: Annotated[
        int | None,
        typer.Option(
            "--after",
            metavar="CURSOR",
            min=0,
            max=MAX_INT,
            help="Events after CURSOR (default: the whole backlog; with --follow, from now).",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            hidden=True,
            help="Refused: a cursor is --after (--since is a time on the other commands).",
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, max=MAX_INT, metavar="N", help="At most N.")
    ] = None,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Keep printing events as they are written (Ctrl-C)."),
    ] = False,
    interval: Annotated[
        float, typer.Option("--interval", min=0.01, help="Seconds between polls with --follow.")
    ] = 0.5,
    as_json: JsonOpt = False,
    schema: SchemaOpt = None,
) -> None:
    """The durable event stream (io-harness 0.33): one event a line, `cursor run step depth
    kind fields`, oldest first; `--json` prints JSON Lines. With `--follow` it waits for new
    events like `tail -f`, from any process writing the store; pass the last cursor seen to
    `--after` to resume. Read-only."""
    db = in_schema(db, schema)
    if since is not None:
        raise CliError(
            EXIT_USAGE,
            "events takes its cursor as --after CURSOR (--since is a time on the other "
            "commands, never a cursor)",
        )
    out = sys.stdout
    if not follow:
        with open_reader(db) as reader:
            store = reader.store
            cursor, left = after or 0, limit
            while left is None or left > 0:
                page = store.events_after(cursor, 1000 if left is None else min(left, 1000), run)
                for c, event in page:
                    out.write(line(c, event, as_json=as_json) + "\n")
                if not page:
                    break
                cursor = page[-1][0]
                left = None if left is None else left - len(page)
        return
    # The read-only Store sees other processes' writes, also those of a writer that opens a
    # still file after it (`dialects.read_only_files`).
    with open_reader(db) as reader:
        shown = 0
        try:
            for c, event in reader.store.follow(after, run_id=run, interval=interval):
                out.write(line(c, event, as_json=as_json) + "\n")
                out.flush()
                shown += 1
                if limit is not None and shown >= limit:
                    break
        except KeyboardInterrupt:
            pass


@app.command("patch")
def patch_command(db: DbArg, run: RunArg, schema: SchemaOpt = None) -> None:
    """A run's whole change as a unified-diff patch series in step order (io-harness 0.51's
    hunks), ready for `git apply` or `patch`; an edit stored without a hunk shows as a `#`
    comment line. Read-only."""
    db = in_schema(db, schema)
    with open_reader(db) as reader:
        store = reader.store
        if store.status(run) is None:
            raise RunNotFoundError(f"no run with id {run} in {reader.where}")
        sys.stdout.write(store.patch(run))
