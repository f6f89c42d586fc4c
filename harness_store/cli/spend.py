"""`harness-store spend`: what the provider calls cost, by model, day or run."""

from __future__ import annotations

import json
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .app import EXIT_USAGE, CliError, DbArg, JsonOpt, SchemaOpt, app
from .output import Column, emit_json, emit_table, note
from .reader import in_schema, open_reader

if TYPE_CHECKING:
    from ..records import PriceTable, Spend


class By(StrEnum):
    MODEL = "model"
    DAY = "day"
    RUN = "run"


def load_prices(path: Path | None) -> PriceTable:
    """The operator's price table (upstream's serde JSON form), or an empty one."""
    from ..records import PriceTable

    if path is None:
        return PriceTable.new("none")
    try:
        return PriceTable.from_document(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise CliError(EXIT_USAGE, f"cannot use {path} as a price table: {exc}") from None


def money(micros: int) -> str:
    from ..records import MICROS_PER_UNIT

    return f"{micros / MICROS_PER_UNIT:,.6f}".rstrip("0").rstrip(".")


def document(s: Spend) -> dict[str, object]:
    return {"key": s.key, "calls": s.calls, **asdict(s.usage), "cost_micros": s.cost_micros,
            "unpriced_calls": s.unpriced_calls}  # fmt: skip


@app.command("spend")
def spend_command(
    db: DbArg,
    by: Annotated[By, typer.Option("--by", help="Group by model, day or run.")] = By.MODEL,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="TIME",
            help="Only calls made at or after TIME (2026-12-07, that day's start, or "
            "2026-12-07T06:00:00Z; UTC when no offset is given).",
        ),
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            metavar="FILE",
            help="Price table JSON, as io-harness serialises `PriceTable` "
            '({"as_of": …, "prices": {"model": {"input": …, "output": …}}}), micro-units per '
            "million tokens. Without it every call is unpriced.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    schema: SchemaOpt = None,
) -> None:
    """Provider-call spend grouped by model, day or run: calls, tokens by kind, cost of the
    priced calls and how many could not be priced (then the cost is a floor). Cost is derived
    from the price table at read time, never stored. Read-only."""
    db = in_schema(db, schema)
    from ..errors import InvalidValueError
    from ..stamps import Stamp

    table = load_prices(prices)
    try:
        start = None if since is None else Stamp.parse(since, "--since")
    except InvalidValueError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    with open_reader(db) as reader:
        method = getattr(reader.store, f"spend_by_{by.value}")
        groups: list[Spend] = method(table, since=None if start is None else start.text)
    if as_json:
        emit_json({"by": by.value, "since": None if start is None else start.text,
                   "as_of": table.as_of,
                   "groups": [document(s) for s in groups]})  # fmt: skip
        return
    emit_table(
        [Column(by.value), Column("calls", "right"), Column("prompt", "right", drop=2),
         Column("completion", "right", drop=2), Column("cache read", "right", drop=3),
         Column("total", "right"), Column("cost", "right"),
         Column("unpriced", "right", drop=1)],
        (
            (s.key, f"{s.calls:,}", f"{s.usage.prompt_tokens:,}",
             f"{s.usage.completion_tokens:,}", f"{s.usage.cache_read_tokens:,}",
             f"{s.usage.total_tokens:,}", money(s.cost_micros),
             f"{s.unpriced_calls:,}" if s.unpriced_calls else "")
            for s in groups
        ),
    )  # fmt: skip
    if prices is None:
        note("no --prices table: every call is unpriced (cost shown as 0)")
