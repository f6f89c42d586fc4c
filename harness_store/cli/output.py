"""Output: consoles, tables, aligned pairs, and values made safe to print on one line."""

from __future__ import annotations

import codecs
import json
import sys
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

PLAIN_WIDTH = 1_000_000
"""Console width for piped output, so Rich never wraps or cuts a line that is not a screen's."""

BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

# --- output ------------------------------------------------------------------------------

ESCAPED = "harness-store-escaped"
"""The codec error handler of the command's stdout and stderr (`escape_unshowable`)."""


def _escaped(error: UnicodeError) -> tuple[str, int]:
    """What an output encoding cannot hold, as `\\uXXXX` escapes (a character past U+FFFF as
    its two UTF-16 halves): readable in a table, and in a JSON document the same escape JSON
    itself writes, so the document still reads back as the store holds it."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    part = error.object[error.start : error.end]
    units = part.encode("utf-16-be", "surrogatepass")
    codes = (int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2))
    return "".join(f"\\u{code:04x}" for code in codes), error.end


codecs.register_error(ESCAPED, _escaped)


def escape_unshowable(*streams: TextIO) -> None:
    """Have each of `streams` write a character its encoding cannot hold (an em dash under
    `PYTHONIOENCODING=ascii`, a check mark on a Latin-1 terminal) as an escape, instead of
    ending the command halfway with a `UnicodeEncodeError`. A stream that is no text file of
    the process's (a test's buffer) is left as it is."""
    for stream in streams:
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            reconfigure(errors=ESCAPED)


@contextmanager
def progress_bars(
    console: Console, *, quiet: bool, label: str = "{task.description}", extra: str = ""
) -> Iterator[Progress | None]:
    """Rich bars (label, bar, done/total, then `extra`: a column template) on `console` for
    the block when it is a terminal; None when it is piped or `quiet`, so long work prints
    no escape codes into a log and the caller says what it says instead."""
    if quiet or not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn

    columns: list[ProgressColumn] = [TextColumn(label), BarColumn(), MofNCompleteColumn()]
    if extra:
        columns.append(TextColumn(extra))
    with Progress(*columns, console=console, transient=False) as bars:
        yield bars


def stdout_console() -> Console:
    """Rich on a terminal; on a pipe, a console with no colour and no width limit."""
    from rich.console import Console

    console = Console(highlight=False, emoji=False)
    if console.is_terminal:
        return console
    return Console(highlight=False, emoji=False, no_color=True, width=PLAIN_WIDTH)


def stderr_console() -> Console:
    """Where progress displays go, so they never mix into the command's output."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, emoji=False)


def visible(value: object) -> str:
    """A value as one line of text: control and bidi characters shown as escapes."""
    if value is None:
        return "—"
    if type(value) is int:
        return str(value)
    text = str(value)
    if text.isprintable() and BIDI_CONTROLS.isdisjoint(text):
        return text
    return "".join(
        c.encode("unicode_escape").decode("ascii")
        if unicodedata.category(c) == "Cc" or c in BIDI_CONTROLS
        else c
        for c in str(value)
    )


def emit_json(document: object) -> None:
    """Print one JSON document on stdout."""
    sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")


def note(message: str) -> None:
    """A remark for the person (how many more rows, nothing found) on stderr, so stdout keeps
    only the data."""
    sys.stderr.write(visible(message) + "\n")


class JsonArray:
    """A JSON array written one element at a time, so a million elements never sit in memory;
    with `lines=True`, JSON Lines (one document a line) instead."""

    def __init__(self, *, lines: bool = False, out: TextIO | None = None) -> None:
        self.lines = lines
        self.out = out or sys.stdout
        self.count = 0

    def __enter__(self) -> JsonArray:
        if not self.lines:
            self.out.write("[")
        return self

    def add(self, document: object) -> None:
        """Write one element."""
        text = json.dumps(document, ensure_ascii=False)
        if self.lines:
            self.out.write(text + "\n")
        else:
            self.out.write(("\n  " if self.count == 0 else ",\n  ") + text)
        self.count += 1

    def __exit__(self, *exc: object) -> None:
        if not self.lines:
            self.out.write("\n]" if self.count else "]")
        if exc[0] is None and not self.lines:
            self.out.write("\n")
        self.out.flush()


@dataclass(frozen=True)
class Column:
    """A table column: its header, alignment, and whether long values are cut to fit.

    Columns that are not `cut` (ids, numbers, times) are never shortened; on a terminal too
    narrow for the table the `drop` ones go first, then the `cut` ones are narrowed, widest
    first, and end in "…".
    """

    header: str
    justify: str = "left"
    cut: bool = False
    drop: int = 0
    """When a terminal is too narrow: 0, never dropped; otherwise dropped before the columns
    with a lower number (the highest first), before any cut column is narrowed below
    `CUT_FLOOR` cells."""
    floor: int | None = None
    """Cells a cut column keeps before the droppable columns have all gone (`CUT_FLOOR` when
    None)."""


CUT_FLOOR = 16
"""Cells a cut column keeps before the droppable columns have all gone."""


def floor_of(column: Column) -> int:
    """The cells a cut column keeps before the droppable columns have all gone."""
    return CUT_FLOOR if column.floor is None else column.floor


def kept_columns(columns: Sequence[Column], natural: list[int], total: int) -> list[int]:
    """The indexes of the columns to show within `total` cells: every one, less the
    droppable ones (highest `drop` first) while the table would not fit with its cut columns
    at their floors (`floor_of`)."""
    keep = list(range(len(columns)))

    def need(indexes: list[int]) -> int:
        cells = (
            min(natural[i], floor_of(columns[i])) if columns[i].cut else natural[i] for i in indexes
        )
        return sum(cells) + 2 * (len(indexes) - 1)

    for i in sorted((i for i, c in enumerate(columns) if c.drop), key=lambda i: -columns[i].drop):
        if need(keep) <= total:
            break
        keep.remove(i)
    return keep


FIRST_ROWS = 200
"""Rows read before the column widths are fixed; the rest stream at those widths."""


def fit_widths(columns: Sequence[Column], natural: list[int], total: int) -> list[int]:
    """Column widths within `total` cells: narrow the cuttable columns, widest first."""
    widths = list(natural)
    spare = sum(widths) + 2 * (len(widths) - 1) - total
    floor = [min(w, 3) if c.cut else w for c, w in zip(columns, widths, strict=True)]
    while spare > 0:
        candidates = [i for i, c in enumerate(columns) if c.cut and widths[i] > floor[i]]
        if not candidates:
            break
        candidates.sort(key=lambda i: widths[i], reverse=True)
        widest = candidates[0]
        runner_up = widths[candidates[1]] if len(candidates) > 1 else floor[widest]
        step = min(spare, widths[widest] - max(runner_up, floor[widest])) or 1
        widths[widest] -= step
        spare -= step
    return widths


def width_of(value: str) -> int:
    """Terminal cells `value` takes (ASCII, the common case, without Rich's table lookup)."""
    if value.isascii():
        return len(value)
    from rich.cells import cell_len

    return cell_len(value)


def fit_cell(value: str, width: int) -> str:
    """`value` cut to `width` cells with a trailing ellipsis when it is longer."""
    if width_of(value) <= width:
        return value
    from rich.cells import set_cell_size

    return set_cell_size(value, max(width - 1, 0)) + "…"


def emit_table(
    columns: Sequence[Column | tuple[str, str]],
    rows: Iterable[Sequence[object]],
    *,
    title: str | None = None,
) -> int:
    """Print a table as it is read, one line a row; return how many rows it printed.

    Widths come from the first `FIRST_ROWS` rows, so a table of a million rows starts at once
    and holds only those in memory. On a terminal the table fits the console's width (cuttable
    columns end in "…") and the header is bold; piped, nothing is cut. A later value wider
    than its column is printed whole, never cut, unless its column is cuttable.
    """
    spec = [c if isinstance(c, Column) else Column(c[0], c[1], cut=False) for c in columns]
    console = stdout_console()
    terminal = console.is_terminal
    iterator = iter(rows)
    first = [[visible(v) for v in row] for row in islice(iterator, FIRST_ROWS)]
    if not first:
        return 0
    natural = [
        max([width_of(c.header), *(width_of(r[i]) for r in first)]) for i, c in enumerate(spec)
    ]
    shown = kept_columns(spec, natural, console.width) if terminal else list(range(len(spec)))
    if len(shown) < len(spec):
        dropped = ", ".join(c.header for i, c in enumerate(spec) if i not in shown)
        note(f"(not shown at {console.width} columns: {dropped}; --json has every field)")
        spec = [spec[i] for i in shown]
        natural = [natural[i] for i in shown]
        first = [[row[i] for i in shown] for row in first]
    widths = fit_widths(spec, natural, console.width) if terminal else natural
    out = sys.stdout

    last = len(spec) - 1
    right = [c.justify == "right" for c in spec]
    cut = [terminal and c.cut for c in spec]

    def line(cells: Sequence[str]) -> str:
        parts = []
        for i, value in enumerate(cells):
            if cut[i]:
                value = fit_cell(value, widths[i])
            if i == last and not right[i]:
                parts.append(value)
                continue
            pad = " " * (widths[i] - width_of(value))
            parts.append(pad + value if right[i] else value + pad)
        return "  ".join(parts).rstrip()

    if title:
        out.write(title + "\n")
    header = line([c.header for c in spec])
    out.write(
        ("\x1b[1m" + header + "\x1b[0m" if terminal and not console.no_color else header) + "\n"
    )
    count = 0
    for cells in first:
        out.write(line(cells) + "\n")
        count += 1
    for row in iterator:
        cells = [visible(v) for v in row]
        out.write(line([cells[i] for i in shown] if len(shown) < len(cells) else cells) + "\n")
        count += 1
    out.flush()
    return count


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """`1 run`, `2 runs`, `1,000 steps`."""
    return f"{count:,} {noun if count == 1 else plural_form or noun + 's'}"


def emit_pairs(pairs: Sequence[tuple[str, str]]) -> None:
    """Label/value lines, aligned."""
    from rich.text import Text

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
    """A stored stamp as `2026-07-31 01:39:56`, UTC (the column headers say so): one written
    with an offset is converted (`harness_store.stamps`); one that names no instant is shown
    as it is, cut to that width."""
    from ..stamps import utc_text

    if stamp is None:
        return "—"
    shown = utc_text(stamp)
    return shown if shown != stamp else stamp.replace("T", " ")[:19]
