"""Upstream's row-format constants and the value checks that keep Python writes in them.

io-harness stores step numbers as Rust `u32` and token counts as `u64` bound through rusqlite,
which refuses a `u64` above `i64::MAX`. A second writer must refuse the same values instead of
letting SQLite widen them to REAL or wrap them, so every write goes through these checks.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeGuard

from .errors import IntegerOverflowError, InvalidValueError

CHECKPOINT_FORMAT = 7
"""The checkpoint layout version stamped into `PRAGMA user_version` (upstream 0.7+)."""

SUCCESS_OUTCOME = "success"
"""The one outcome string that means the run did what it was asked."""

REPLY_TURN = "reply"
"""`runs.turn_kind` of a session turn that answered rather than acted (0.37)."""

MEMORY_MAX_ENTRIES = 64
"""Most entries one workspace's memory may hold."""

MEMORY_MAX_CHARS = 16_000
"""Most characters one workspace's memory entries may total."""

MEMORY_MAX_ENTRY_CHARS = MEMORY_MAX_CHARS // 8
"""Most characters one memory value may hold; longer values are cut and marked."""

MEMORY_TRUNCATED = "…[truncated]"
"""The marker ending a memory value that was cut to `MEMORY_MAX_ENTRY_CHARS`."""

BUSY_TIMEOUT_SECONDS = 5.0
"""How long a contended statement waits for the writer, as upstream's `BUSY_TIMEOUT`."""


U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
I64_MAX = 2**63 - 1
I64_MIN = -(2**63)


def is_int(value: object) -> TypeGuard[int]:
    """Whether `value` is an integer: an `int` and not a `bool` (which Python counts as one,
    and a store would take as 0 or 1). The one spelling of that check."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """Whether `value` is a number (`int` or `float`, not a `bool`)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def u32(value: int, name: str) -> int:
    """Check a value upstream keeps as `u32` (step numbers, depths, step caps)."""
    if not is_int(value):
        raise InvalidValueError(f"{name} must be an int, got {type(value).__name__}")
    if not 0 <= value <= U32_MAX:
        raise InvalidValueError(f"{name} must be between 0 and {U32_MAX}, got {value}")
    return value


def u64(value: int, name: str) -> int:
    """Check a value upstream keeps as `u64` and binds as SQLite INTEGER (at most 2⁶³ − 1)."""
    if not is_int(value):
        raise InvalidValueError(f"{name} must be an int, got {type(value).__name__}")
    if not 0 <= value <= I64_MAX:
        raise InvalidValueError(f"{name} must be between 0 and {I64_MAX}, got {value}")
    return value


def wrapped_u64(value: int, name: str) -> int:
    """A `u64` upstream writes with a wrapping `as i64` cast (MCP `millis`, context
    `est_tokens` and `reported_tokens`): any value up to 2⁶⁴ − 1 is taken, and the stored
    integer is its two's-complement `i64`, exactly the bits io-harness writes."""
    if not is_int(value):
        raise InvalidValueError(f"{name} must be an int, got {type(value).__name__}")
    if not 0 <= value <= U64_MAX:
        raise InvalidValueError(f"{name} must be between 0 and {U64_MAX}, got {value}")
    return value - 2**64 if value > I64_MAX else value


def unwrapped_u64(stored: int | None) -> int | None:
    """Read back a `wrapped_u64` column as upstream does (`as u64`): a negative integer is
    the high half of the unsigned range."""
    if stored is None:
        return None
    value = int(stored)
    return value + 2**64 if value < 0 else value


def i64(value: int, name: str) -> int:
    """Check a value upstream keeps as `i64` (run ids)."""
    if not is_int(value):
        raise InvalidValueError(f"{name} must be an int, got {type(value).__name__}")
    if not I64_MIN <= value <= I64_MAX:
        raise InvalidValueError(f"{name} must fit a signed 64-bit integer, got {value}")
    return value


def token_sum(value: Any) -> int:
    """A token total as SQLite computes it: an integer that must fit 64 bits. PostgreSQL sums
    BIGINT into NUMERIC, so an overflow there is caught here and raised as SQLite raises it."""
    total = int(value or 0)
    if total > I64_MAX:
        raise IntegerOverflowError(
            f"integer overflow: the token total {total} does not fit 64 bits"
        )
    return total


def opt_u64(value: int | None, name: str) -> int | None:
    """`u64` for an optional column."""
    return None if value is None else u64(value, name)


def opt_wrapped_u64(value: int | None, name: str) -> int | None:
    """`wrapped_u64` for an optional column."""
    return None if value is None else wrapped_u64(value, name)


def opt_u32(value: int | None, name: str) -> int | None:
    """`u32` for an optional column."""
    return None if value is None else u32(value, name)


def text(value: str, name: str) -> str:
    """Check a TEXT value: a `str` without NUL (SQLite would cut a C string there)."""
    if not isinstance(value, str):
        raise InvalidValueError(f"{name} must be a str, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidValueError(f"{name} contains a NUL character, which SQLite text cannot keep")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidValueError(
                f"{name} is not valid Unicode text (a lone surrogate at {exc.start})"
            ) from None
    return value


def opt_text(value: str | None, name: str) -> str | None:
    """`text` for an optional column."""
    return None if value is None else text(value, name)


STEP_CALLS_SEPARATOR = " | "
"""What io-harness joins a step's tool calls with in `steps.tool_call` (`name:args | name:args`)."""

_CALL_NAME = re.compile(r"[A-Za-z0-9_.\-]+:")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON: RFC 8259 has no NaN or Infinity")


JSON = json.JSONDecoder(parse_constant=_no_constant)
"""JSON as RFC 8259 defines it, for every reader of a step's tool calls: Python's own reader
also takes `NaN`, `Infinity` and `-Infinity` (which `json.dumps` writes), and DuckDB's,
polars' and io-harness's (serde's) readers refuse them."""

WRITE_FILE_TOOL = "write_file"
"""The tool the single-file loop calls; that loop records only the call's arguments."""


def step_tool_calls(
    tool_call: str, decoder: json.JSONDecoder = JSON
) -> tuple[tuple[str, str], ...] | None:
    """A step's `tool_call` text as its calls, each `(name, arguments as JSON text)`.

    io-harness's agent loop writes each call as `name:` followed by its arguments as compact
    JSON and joins a step's calls with `" | "`; its single-file loop writes only the
    `write_file` call's arguments (a bare JSON object). The text is read by that grammar —
    a name, a colon, exactly one JSON value, then the separator or the end — so a `" | "`
    inside an argument string is part of the argument. Empty text is no call (`()`); text
    not in either form is `None`, and each arguments text returned is valid JSON (RFC 8259:
    no NaN or Infinity). `decoder`: another JSON reader, for `check`, which names the calls
    only a lenient reader (Python's own, which takes NaN) would read.
    """
    if tool_call == "":
        return ()
    if tool_call.startswith("{"):
        try:
            value, end = decoder.raw_decode(tool_call)
        except ValueError:
            return None
        return (
            ((WRITE_FILE_TOOL, tool_call),)
            if end == len(tool_call) and isinstance(value, dict)
            else None
        )
    calls: list[tuple[str, str]] = []
    at = 0
    while True:
        name = _CALL_NAME.match(tool_call, at)
        if name is None:
            return None
        start = name.end()
        try:
            _, end = decoder.raw_decode(tool_call, start)
        except ValueError:
            return None
        calls.append((name.group()[:-1], tool_call[start:end]))
        if end == len(tool_call):
            return tuple(calls)
        if not tool_call.startswith(STEP_CALLS_SEPARATOR, end):
            return None
        at = end + len(STEP_CALLS_SEPARATOR)
