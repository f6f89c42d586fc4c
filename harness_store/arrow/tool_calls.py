"""A step's `tool_call` text as its calls in Arrow: `tool_calls` (a list of `{name, arguments}`)
and the first call's `tool` and `tool_args`, every arguments value valid JSON or null.

io-harness writes each call as `name:` and its arguments as compact JSON, and joins a step's
calls with `" | "` (which can also stand inside an argument string); the grammar is
`formats.step_tool_calls`. Read per row in Python that costs more than the rest of an export,
so the common row — one call whose arguments are an object `{…}`, no `" | "` anywhere — is
split with string kernels and its arguments checked as JSON all at once by Arrow's JSON
reader; only the rows that may hold several calls (a `" | "`), the single-file loop's bare
arguments (`{…}`), other arguments than an object, or a batch whose arguments are not all
valid go through the grammar one by one. Arrow's JSON reader also takes NaN and Infinity,
which RFC 8259 and the grammar do not: rows that may hold one go through the grammar too.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ..formats import STEP_CALLS_SEPARATOR, step_tool_calls
from .compute import equals, filled

TOOL_CALL = pa.struct([("name", pa.string()), ("arguments", pa.string())])
TOOL_CALLS = pa.list_(TOOL_CALL)

_SYNTAX_ONLY = pj.ParseOptions(explicit_schema=pa.schema([]), unexpected_field_behavior="ignore")
"""Parse each line, keep no field: a check that every line is one JSON object."""


def tool_call_columns(source: pa.Array[Any]) -> dict[str, pa.Array[Any]]:
    """`tool_calls`, `tool` and `tool_args` of a batch's `tool_call` column: an empty text is
    no call (`[]`, the others null); text in no form of the grammar is null in all three."""
    parts = pc.split_pattern(source, ":", max_splits=1)
    values = pc.list_flatten(parts)
    offsets = parts.offsets.slice(0, len(parts))
    if len(offsets):
        offsets = pc.subtract(offsets, offsets[0])
    two = filled(equals(pc.list_value_length(parts), 2), False)
    first = pc.if_else(two, offsets, pa.scalar(None, pa.int32()))
    tool = pc.take(values, first)
    args = pc.take(values, pc.add(first, 1))
    plain = tool
    for allowed in ("_", ".", "-"):
        plain = pc.replace_substring(plain, allowed, "a")
    named = filled(pc.ascii_is_alnum(plain), False)  # false for '' and for any other byte
    # a " | " may join several calls; a line break is not one JSON value a line
    several = holding(source, STEP_CALLS_SEPARATOR, "\n")
    bare = filled(pc.starts_with(source, "{"), False)
    constant = _may_hold_constants(source)
    braced = filled(pc.and_(pc.starts_with(args, "{"), pc.ends_with(args, "}")), False)
    fast = pc.and_(pc.and_(pc.and_(named, braced), pc.invert(several)), pc.invert(constant))
    slow = pc.or_(pc.or_(several, bare), pc.and_(named, pc.invert(braced)))
    slow = pc.or_(slow, constant)
    if not _objects(args.filter(fast)):  # some row is not one JSON object: ask the grammar
        slow, fast = pc.or_(slow, fast), pa.array([False] * len(source), pa.bool_())
    empty = filled(equals(source, ""), False)
    missing = pa.scalar(None, pa.string())
    columns = {
        "tool_calls": _one_call_lists(fast, empty, tool, args),
        "tool": pc.if_else(fast, tool, missing),
        "tool_args": pc.if_else(fast, args, missing),
    }
    if pc.any(slow).as_py():
        columns = _with_parsed(columns, source, slow)
    return columns


def holding(source: pa.Array[Any], *texts: str) -> pa.Array[Any]:
    """Whether each value of a string array holds one of `texts`: one search of its data
    buffer per text (many times faster than Arrow's per-value kernel for a text seldom
    found)."""
    count = len(source)
    _, offsets_buffer, data = source.buffers()
    found = bytearray(count)
    if data is not None and offsets_buffer is not None and count:
        offsets = memoryview(offsets_buffer).cast("i")[source.offset : source.offset + count + 1]
        raw = data.to_pybytes()
        for text in texts:
            needle = text.encode()
            at = raw.find(needle, offsets[0], offsets[count])
            while at != -1:
                row = bisect_right(offsets, at) - 1
                if at + len(needle) <= offsets[row + 1]:
                    found[row] = 1
                    at = raw.find(needle, offsets[row + 1], offsets[count])
                else:  # it runs into the next value: not in this one
                    at = raw.find(needle, at + 1, offsets[count])
    flags = pa.Array.from_buffers(pa.uint8(), count, [None, pa.py_buffer(bytes(found))])
    return pc.not_equal(flags, pa.scalar(0, pa.uint8()))


NON_FINITE = r"[:,\[]\s*-?(?:NaN|Inf)"
"""Where Arrow's JSON reader takes `NaN`, `Inf` or `Infinity` as a value, which RFC 8259 (and
so the grammar) does not: such rows are left to the grammar."""


def _may_hold_constants(source: pa.Array[Any]) -> pa.Array[Any]:
    """Whether each value may hold a NaN or an Infinity as a JSON value: one search of the
    data buffer for each word, then the pattern over the few rows that hold one."""
    words = holding(source, "NaN", "Inf")
    if not pc.any(words).as_py():
        return words
    rows = pc.indices_nonzero(words)
    matched = pc.match_substring_regex(source.take(rows), NON_FINITE)
    found = bytearray(len(source))
    for row, hit in zip(rows.to_pylist(), matched.to_pylist(), strict=True):
        if hit and row is not None:
            found[row] = 1
    flags = pa.Array.from_buffers(pa.uint8(), len(source), [None, pa.py_buffer(bytes(found))])
    constant: pa.Array[Any] = pc.not_equal(flags, pa.scalar(0, pa.uint8()))
    return constant


def _objects(arguments: pa.Array[Any]) -> bool:
    """Whether each value is one JSON object (checked by Arrow's JSON reader, one line each;
    none holds a line break)."""
    if not len(arguments):
        return True
    lines = pc.binary_join_element_wise(  # type: ignore[call-overload]
        arguments, pa.scalar("\n"), pa.scalar("")
    )  # each value and a line break
    _, offsets, data = lines.buffers()
    bounds = pa.Array.from_buffers(pa.int32(), len(lines) + 1, [None, offsets], offset=lines.offset)
    start, end = bounds[0].as_py(), bounds[-1].as_py()
    text = data.slice(start, end - start)  # the lines, one after another
    try:
        read = pj.read_json(pa.BufferReader(text), parse_options=_SYNTAX_ONLY)  # type: ignore[arg-type]
    except pa.ArrowInvalid:
        return False
    return read.num_rows == len(arguments)


def _one_call_lists(
    fast: pa.Array[Any], empty: pa.Array[Any], tool: pa.Array[Any], args: pa.Array[Any]
) -> pa.Array[Any]:
    """A list of the one call on each `fast` row, an empty list on each `empty` row, null
    elsewhere."""
    lengths = pc.cast(fast, pa.int32())
    ends = pc.cumulative_sum(lengths)
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), ends.cast(pa.int32())])
    calls = pa.StructArray.from_arrays(
        [tool.filter(fast), args.filter(fast)], fields=list(TOOL_CALL)
    )
    valid = pc.or_(fast, empty)
    lists: pa.Array[Any] = pa.ListArray.from_arrays(  # type: ignore[call-overload]
        offsets, calls, type=TOOL_CALLS, mask=pc.invert(valid)
    )
    return lists


def _with_parsed(
    columns: dict[str, pa.Array[Any]], source: pa.Array[Any], slow: pa.Array[Any]
) -> dict[str, pa.Array[Any]]:
    """`columns` with the `slow` rows read by the grammar."""
    rows = pc.indices_nonzero(slow)
    lists: list[list[dict[str, str]] | None] = []
    for text in source.take(rows).to_pylist():
        calls = None if text is None else step_tool_calls(text)
        lists.append(None if calls is None else [{"name": n, "arguments": a} for n, a in calls])
    firsts = [calls[0] if calls else None for calls in lists]
    parsed = {
        "tool_calls": pa.array(lists, TOOL_CALLS),
        "tool": pa.array([f and f["name"] for f in firsts], pa.string()),
        "tool_args": pa.array([f and f["arguments"] for f in firsts], pa.string()),
    }
    count = len(source)
    order = pa.array(range(count), pa.int64())
    placed = pc.add(pc.subtract(pc.cumulative_sum(pc.cast(slow, pa.int64())), 1), count)
    positions = pc.if_else(slow, placed, order)
    return {
        name: pa.concat_arrays([array, parsed[name]]).take(positions)
        for name, array in columns.items()
    }
