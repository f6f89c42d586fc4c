"""harness_store's records in the shape `rustdebug.parse` gives upstream's `{:?}` rendering of
the same values, so a getter's Python answer compares with `==` against the oracle's dump.

Records become `{"_type": Name, field: value…}`, optional values their content or None,
`Vec`s lists, tuples tuples; enums their Rust variant names; a tool call's JSON arguments
serde_json's `Value` Debug (`Object {"k": String("v")}`); a run event's kind its variant with
the kind's fields; a snapshot's kept state `Text(..)`, `Absent` or `Unkept(..)`.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

from harness_store.records import RunEvent, Snapshot, ToolCall


def camel(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


def json_value(value: Any) -> Any:
    """serde_json's `Value` as its Debug form parses."""
    if value is None:
        return "Null"
    if isinstance(value, bool):
        return {"_type": "Bool", "_0": value}
    if isinstance(value, int | float):
        return {"_type": "Number", "_0": value}
    if isinstance(value, str):
        return {"_type": "String", "_0": value}
    if isinstance(value, dict) and not value:
        return {"_type": "Object"}  # `Object {}` parses as a struct with no fields
    if isinstance(value, dict):
        return {"_type": "Object", "_0": {k: json_value(v) for k, v in sorted(value.items())}}
    return {"_type": "Array", "_0": [json_value(v) for v in value]}


def debug(value: Any, *, field: bool = False) -> Any:
    """`value` as the parsed Debug rendering of upstream's equivalent."""
    if isinstance(value, Enum):
        return camel(str(value.value))
    if isinstance(value, RunEvent):
        kind: Any = camel(value.kind)  # a unit variant renders as its bare name
        if value.fields:
            kind = {"_type": kind, **{k: debug(v) for k, v in value.fields.items()}}
        return {"_type": "RunEvent", "run_id": value.run_id, "step": value.step,
                "depth": value.depth, "kind": kind}  # fmt: skip
    if isinstance(value, Snapshot):
        kept: Any = "Absent" if value.state == "absent" else {
            "_type": camel(value.state), "_0": value.before}  # fmt: skip
        return {"_type": "Snapshot", "step": value.step, "path": value.path, "kept": kept}
    if isinstance(value, ToolCall):
        return {"_type": "ToolCall", "name": value.name, "arguments": json_value(value.arguments)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {"_type": type(value).__name__}
        for f in dataclasses.fields(value):
            out[f.name] = debug(getattr(value, f.name), field=True)
        return out
    if isinstance(value, tuple):
        items = [debug(v) for v in value]
        return items if field else tuple(items)
    if isinstance(value, list):
        return [debug(v) for v in value]
    return value
