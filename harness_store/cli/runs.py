"""`harness-store runs`: one line a run, newest first, streamed page by page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import DamagedStoreError, StoreError
from ..records.runs import RunStatus
from .app import MAX_INT, DbArg, JsonOpt, SchemaOpt, app
from .output import (
    Column,
    JsonArray,
    emit_table,
    human_duration,
    note,
    plural,
    short_time,
)
from .reader import Reader, open_reader

if TYPE_CHECKING:
    from ..store import Store
    from ..store.listings import Listings


DEFAULT_RUNS = 50
"""How many runs `runs` lists without `--limit` or `--all`: the newest."""

PAGE = 500
"""Runs read per transaction (each run's totals are then asked of the Store)."""

OUTCOME_FLOOR, GOAL_FLOOR = 10, 12
"""The cells the outcome and the goal keep on a narrow terminal before a column is left out:
at 80 columns the outcome (what tells a failed run from a good one) stays, beside the start
time and the goal; parent and how long it took go first."""


def run_totals(reader: Reader, run_id: int) -> tuple[int, int, bool]:
    """A run's (highest step, tokens, whether the tokens passed 2⁶³−1), as the Store counts
    them (`last_step`, `spent_tokens`: a reply turn's tokens are its provider calls'). A total
    too large for the database's integer is summed exactly by the Store's own rule instead
    (`exact_spent_tokens`), so one such run never hides the others."""
    from ..store.runs import exact_spent_tokens

    store = reader.store
    steps = store.last_step(run_id)
    try:
        return steps, store.spent_tokens(run_id), False
    except StoreError:
        tokens = exact_spent_tokens(store, run_id)
        return steps, tokens, tokens > MAX_INT


def run_pages(
    reader: Reader, status: str | None, limit: int | None, origin: str | None = None
) -> Iterator[dict[str, Any]]:
    """The runs, newest first, with their step and token totals and recorded duration, as
    the Store's package lists them (`Listings.run_page`): `PAGE` runs per short read, so
    `--all` over 100k runs holds one page at a time."""
    store = listings(reader.store)
    left = limit
    before: int | None = None
    while left is None or left > 0:
        size = PAGE if left is None else min(PAGE, left)
        page = store.run_page(status=status, origin=origin, before=before, limit=size)
        for run in page:
            steps, tokens, overflow = run_totals(reader, run.run_id)
            yield {
                "run_id": run.run_id,
                "parent_run_id": run.parent_run_id,
                "depth": run.depth,
                "status": run.status,
                "outcome": run.outcome,
                "steps": steps,
                "tokens": tokens,
                "tokens_overflow": overflow,
                "started_at": run.started_at,
                "duration_ms": run.duration_ms,
                "success": run.success,
                "goal": run.goal,
            }
        if len(page) < size:
            return
        before = page[-1].run_id
        if left is not None:
            left -= len(page)


def listings(store: Store) -> Listings:
    """The command's listings over `store` (`store.listings`, imported when a command runs)."""
    from ..store.listings import Listings

    return Listings(store)


def known_origin(store: Store, origin: str) -> str:
    """`origin` as the store knows it: a UUID or path as given, or a relative path resolved
    from here, as sync resolved it when it recorded the path."""
    from ..sync.lookup import has_origin

    for candidate in dict.fromkeys([origin, str(Path(origin).expanduser().resolve())]):
        if has_origin(store, candidate):
            return candidate
    raise typer.BadParameter(
        f"no store synced into DB has origin {origin!r}", param_hint="--origin"
    )


def tokens_cell(row: dict[str, Any]) -> str:
    """The tokens column: the total, or `overflow` past what io-harness can store."""
    return "overflow" if row["tokens_overflow"] else f"{row['tokens']:,}"


def refuse_damaged(reader: Reader) -> None:
    """Before saying "no runs": a damaged page can read as an empty table, so the file's own
    check (SQLite's `integrity_check`) is asked, and a damaged store refused (exit 3)."""
    from ..store.check import file_damage

    problems = file_damage(reader.store)
    if problems:
        raise DamagedStoreError(
            f"{reader.where} lists no runs, but its file is damaged (integrity_check: "
            f"{problems[0]}); nothing was changed. `harness-store check` names the damage; the "
            "sqlite3 shell's `.recover` saves the rows that are whole into a new file"
        )


@app.command("runs")
def runs_command(
    db: DbArg,
    status: Annotated[
        RunStatus | None,
        typer.Option("--status", help="Only runs with this status.", case_sensitive=False),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", min=1, max=MAX_INT, metavar="N", help=f"The newest N runs ({DEFAULT_RUNS})."
        ),
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every run, streamed.")] = False,
    origin: Annotated[
        str | None,
        typer.Option(
            "--origin", metavar="ID", help="Only runs synced from this origin (UUID or path)."
        ),
    ] = None,
    schema: SchemaOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One line a run, newest first: id, parent, status, outcome, steps, tokens, started
    (UTC), how long it took (recorded for runs finished by 0.12+), goal. The newest 50 unless
    --limit or --all; a line on stderr says how many more there are. Read-only."""
    if every and limit is not None:
        raise typer.BadParameter("give --limit or --all, not both", param_hint="--all")
    wanted = None if every else limit or DEFAULT_RUNS
    state = status.value if status is not None else None
    with open_reader(db, schema=schema) as reader:
        if origin is not None:
            origin = known_origin(reader.store, origin)
        rows = run_pages(reader, state, wanted, origin)
        if as_json:
            with JsonArray() as array:
                for row in rows:
                    array.add(row)
            shown = array.count
        else:
            shown = emit_table(
                [
                    Column("id", "right"),
                    Column("parent", "right", drop=4),
                    Column("status"),
                    Column("outcome", cut=True, drop=1, floor=OUTCOME_FLOOR),
                    Column("steps", "right"),
                    Column("tokens", "right"),
                    Column("started (UTC)", drop=2),
                    Column("took", "right", drop=3),
                    Column("goal", cut=True, floor=GOAL_FLOOR),
                ],
                (
                    (
                        row["run_id"],
                        row["parent_run_id"],
                        row["status"],
                        row["outcome"],
                        f"{row['steps']:,}",
                        tokens_cell(row),
                        short_time(row["started_at"]),
                        human_duration(row["duration_ms"]),
                        row["goal"],
                    )
                    for row in rows
                ),
            )
        total = (
            listings(reader.store).count_runs(status=state, origin=origin)
            if wanted is not None and shown == wanted
            else shown
        )
        if shown == 0:
            refuse_damaged(reader)
    which = f" with status {state}" if state else ""
    if shown == 0:
        note(f"no runs{which}")
    elif total > shown:
        more = total - shown
        note(f"{plural(shown, 'run')} shown{which}; {more:,} more (--limit N or --all)")
