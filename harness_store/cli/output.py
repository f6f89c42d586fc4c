"""Output: consoles, tables, aligned pairs, and values made safe to print on one line."""

from __future__ import annotations

import json
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    pass


PLAIN_WIDTH = 1_000_000
"""Console width for piped output, so Rich never wraps or cuts a line that is not a screen's."""

BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

# --- output ------------------------------------------------------------------------------


def stdout_console() -> Console:
    """Rich on a terminal; on a pipe, a console with no colour and no width limit."""
    console = Console(highlight=False, emoji=False)
    if console.is_terminal:
        return console
    return Console(highlight=False, emoji=False, no_color=True, width=PLAIN_WIDTH)


def stderr_console() -> Console:
    """Where progress displays go, so they never mix into the command's output."""
    return Console(stderr=True, highlight=False, emoji=False)


def visible(value: object) -> str:
    """A value as one line of text: control and bidi characters shown as escapes."""
    if value is None:
        return "—"
    return "".join(
        c.encode("unicode_escape").decode("ascii")
        if unicodedata.category(c) == "Cc" or c in BIDI_CONTROLS
        else c
        for c in str(value)
    )


def emit_json(document: object) -> None:
    """Print one JSON document on stdout."""
    sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")


def emit_table(
    columns: Sequence[tuple[str, JustifyMethod]],
    rows: Iterable[Sequence[object]],
    *,
    title: str | None = None,
) -> None:
    """A table: a Rich table on a terminal, aligned plain lines otherwise.

    `columns` are (header, justify) pairs; the last column is never padded (it holds text such
    as a goal or a decision, which may be long).
    """
    console = stdout_console()
    cells = [[visible(v) for v in row] for row in rows]
    if console.is_terminal:
        grid = Table(title=title, title_justify="left", highlight=False)
        for index, (header, justify) in enumerate(columns):
            last = index == len(columns) - 1
            grid.add_column(header, justify=justify, no_wrap=not last, overflow="fold")
        for row in cells:
            grid.add_row(*(Text(c) for c in row))
        console.print(grid)
        return
    from rich.cells import cell_len

    headers = [header for header, _ in columns]
    widths = [max([cell_len(h), *(cell_len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    if title:
        console.print(Text(title))
    for row in [headers, *cells]:
        parts = []
        for i, (value, (_, justify)) in enumerate(zip(row, columns, strict=True)):
            pad = " " * (widths[i] - cell_len(value))
            last = i == len(columns) - 1
            parts.append(pad + value if justify == "right" else value + ("" if last else pad))
        console.print(Text("  ".join(parts).rstrip()))


def emit_pairs(pairs: Sequence[tuple[str, str]]) -> None:
    """Label/value lines, aligned."""
    console = stdout_console()
    width = max(len(label) for label, _ in pairs) + 2
    for label, value in pairs:
        line = Text(f"{label}:".ljust(width), style="bold" if console.is_terminal else "")
        line.append(value)
        console.print(line)


def human_size(size: int) -> str:
    """Bytes with thousands separators and a binary-prefixed approximation."""
    value, unit = float(size), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{size:,} bytes" + ("" if unit == "B" else f" ({value:.1f} {unit})")


def human_duration(ms: int | None) -> str:
    """Milliseconds for a person: 850ms, 12.3s, 4m05s, 2h03m."""
    if ms is None:
        return "—"
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def short_time(stamp: str | None) -> str:
    """`2026-07-31T01:39:56.041Z` as `2026-07-31 01:39:56`."""
    return "—" if stamp is None else stamp.replace("T", " ")[:19]
