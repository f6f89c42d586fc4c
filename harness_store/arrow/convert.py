"""Stored rows to Arrow record batches, each column read back as upstream meant it.

The conversions are vectorised (Arrow compute) on the common path. A value no column of its
type can hold as it is — bytes in a text column (a BLOB, or text that is not UTF-8), a number
in a text column, text, a fraction or Infinity in an integer column — is refused by name
(`UnreadableValueError`: the table, the row, the column, the value), never replaced or left
null: io-harness's own read of such a row fails too, and `harness-store check` names it. A
stamp in neither of upstream's formats goes through a per-value path and is left null.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import UnreadableValueError
from ..formats import JSON
from ..stamps import Stamp
from .schema import ORIGIN, Kind, Parsed, TableShape
from .tool_calls import tool_call_columns

_TAKEN_WRONGLY = frozenset({bytes, float})
"""Types pyarrow's struct conversion would take without a word: UTF-8 bytes as text, a
fraction truncated to an integer. No column of the store holds either as it is."""


def to_batch(
    shape: TableShape,
    names: Sequence[str],
    rows: Sequence[Sequence[Any]],
    schema: pa.Schema,
) -> pa.RecordBatch:
    """One batch of `rows` (tuples in `names` order, `origin` last when `schema` has it) in
    `schema`'s columns."""
    raw = raw_arrays(shape, names, rows)
    arrays: list[pa.Array[Any]] = []
    stored: dict[str, pa.Array[Any]] = {}
    split: dict[str, dict[str, pa.Array[Any]]] = {}
    for field in schema:
        if field.name == ORIGIN:
            arrays.append(raw[ORIGIN])
            continue
        kind = shape.kinds.get(field.name)
        if kind is not None:
            array = stored.get(field.name)
            if array is None:
                array = stored[field.name] = typed(kind, raw[field.name])
            arrays.append(array)
            continue
        parsed = next(p for p in shape.parsed if p.name == field.name)
        source = raw[parsed.source]
        if parsed.source == "tool_call":  # its three columns from one pass over it
            parts = split.get(parsed.source)
            if parts is None:
                parts = split[parsed.source] = tool_call_columns(source)
            arrays.append(parts[parsed.name])
            continue
        arrays.append(parsed_array(parsed, source))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _textual(shape: TableShape, name: str) -> bool:
    return name == ORIGIN or shape.kinds[name] in (Kind.TEXT, Kind.STAMP)


def raw_arrays(
    shape: TableShape, names: Sequence[str], rows: Sequence[Sequence[Any]]
) -> dict[str, pa.Array[Any]]:
    """The stored columns of `rows` as Arrow in their stored types (text as `string`, the
    integers as `int64`). Converted in one pass by pyarrow, the rows read as a struct's
    values, which spares transposing them in Python; a batch holding a value of another
    type (text in an integer column of an old SQLite store, bytes that are not UTF-8) goes
    column by column through the paths that read what they can."""
    textual = [_textual(shape, name) for name in names]
    if rows and any(type(value) in _TAKEN_WRONGLY for row in rows for value in row):
        refuse_odd_values(shape, names, textual, rows)
    if rows:
        fields = [
            (n, pa.string() if t else pa.int64()) for n, t in zip(names, textual, strict=True)
        ]
        try:
            struct = cast("pa.StructArray", pa.array(rows, type=pa.struct(fields)))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            pass
        else:
            return dict(zip(names, struct.flatten(), strict=True))
        refuse_odd_values(shape, names, textual, rows)
    columns = zip(*rows, strict=True) if rows else (() for _ in names)
    return {
        name: _text(values) if text else _ints(values)
        for name, text, values in zip(names, textual, columns, strict=True)
    }


def refuse_odd_values(
    shape: TableShape, names: Sequence[str], textual: Sequence[bool], rows: Sequence[Sequence[Any]]
) -> None:
    """`UnreadableValueError` for the first value in `rows` its column cannot hold as it is,
    naming its row by the table's key (where the rows hold it)."""
    key = next((k for k in (*shape.key, "run_id", "step") if k in names), None)
    at = names.index(key) if key is not None else None
    for i, (name, text) in enumerate(zip(names, textual, strict=True)):
        for row in rows:
            value = row[i]
            if value is None or (isinstance(value, str) if text else type(value) is int):
                continue
            if text and isinstance(value, bytes):
                try:
                    value.decode("utf-8")
                    what = "bytes, not text"
                except UnicodeDecodeError:
                    what = "bytes that are not UTF-8 text"
            else:
                what = "not text" if text else "not an integer"
            row_id = row[at] if at is not None else "?"
            raise UnreadableValueError.in_row(shape.name, key or "key", row_id, name, value, what)


def typed(kind: Kind, raw: pa.Array[Any]) -> pa.Array[Any]:
    """A stored column (`string` or `int64`, as `raw_arrays` reads it) in its Arrow type."""
    if kind is Kind.BOOL:
        return cast("pa.Array[Any]", pc.not_equal(raw, pa.scalar(0, pa.int64())))
    if kind is Kind.STAMP:
        return stamps(raw)
    # The integers (both kinds of u64 too: the signed value the store keeps) and text.
    return raw


def _text(values: Sequence[Any]) -> pa.Array[Any]:
    try:
        return pa.array(values, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return pa.array(
            [None if v is None else v.decode("utf-8", "replace") if isinstance(v, bytes)
             else str(v) for v in values],
            type=pa.string(),
        )  # fmt: skip


def _ints(values: Sequence[Any]) -> pa.Array[Any]:
    try:
        return pa.array(values, type=pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([_int_or_none(v) for v in values], type=pa.int64())


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def stamps(text: pa.Array[Any]) -> pa.Array[Any]:
    """Upstream's text stamps as `timestamp[us, UTC]` (both of its formats)."""
    try:
        naive = pc.replace_substring_regex(text, "Z$", "").cast(pa.timestamp("us"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([_stamp(v) for v in text.to_pylist()], type=pa.timestamp("us", tz="UTC"))
    return naive.cast(pa.timestamp("us", tz="UTC"))


def _stamp(value: str | None) -> datetime | None:
    found = Stamp.read(value)
    return None if found is None else found.instant


def parsed_array(parsed: Parsed, source: pa.Array[Any]) -> pa.Array[Any]:
    """A parsed column from its source column."""
    if parsed.source == "tool_call":
        return tool_call_columns(source)[parsed.name]
    values = source.to_pylist()
    reader = _READERS[parsed.name]
    return pa.array([None if v is None else reader(v) for v in values], type=parsed.type)


def _json(text: str) -> Any:
    try:
        return JSON.decode(text)
    except ValueError:
        return None


def _call_names(text: str) -> list[str] | None:
    value = _json(text)
    if not isinstance(value, list):
        return None
    names = [item.get("name") for item in value if isinstance(item, dict)]
    return [n for n in names if isinstance(n, str)] if len(names) == len(value) else None


def _strings(text: str) -> list[str] | None:
    value = _json(text)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def _plan_steps(text: str) -> list[dict[str, str | None]] | None:
    value = _json(text)
    if not isinstance(value, list):
        return None
    steps = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("intent"), str):
            return None
        agent = item.get("agent")
        steps.append({"intent": item["intent"], "agent": agent if isinstance(agent, str) else None})
    return steps


def _policy_defaults(text: str) -> dict[str, str | None] | None:
    value = _json(text)
    defaults = value.get("defaults") if isinstance(value, dict) else None
    if not isinstance(defaults, dict):
        return None
    return {act: _str_or_none(defaults.get(act)) for act in ("read", "write", "exec", "net")}


def _policy_layers(text: str) -> list[str] | None:
    value = _json(text)
    layers = value.get("layers") if isinstance(value, dict) else None
    if not isinstance(layers, list):
        return None
    return [str(layer.get("name", "")) for layer in layers if isinstance(layer, dict)]


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


_READERS = {
    "call_names": _call_names,
    "deny_write_globs": _strings,
    "choice_list": _strings,
    "plan_steps": _plan_steps,
    "policy_defaults": _policy_defaults,
    "policy_layers": _policy_layers,
}
