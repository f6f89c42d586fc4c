"""Run policies as io-harness 0.13 reads and writes them.

Upstream stores a run's `Policy` as `serde_json` text and reads it back with serde's derived
deserializer, so a record is only resumable if it has that shape: `layers` (each a `name` and
`rules` of `act`/`effect`/`pattern`) and `defaults` (`read`, `write`, `exec`, and `net`, which a
0.7-era policy lacks and which then reads as `deny`). Unknown fields are ignored, as serde does.
Writes are re-serialised the way upstream serialises the struct, so the stored text is what
io-harness itself would have written for the same policy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

ACTS = ("read", "write", "exec", "net")
"""Upstream's `Act` variants, as serde names them (snake_case)."""

EFFECTS = ("allow", "ask", "deny")
"""Upstream's `Effect` variants, as serde names them."""

_MISSING = object()


class PolicyFormatError(ValueError):
    """A policy document io-harness 0.13 could not deserialise; the message says why."""


class _Object(list[tuple[str, Any]]):
    """A JSON object kept as its pairs, so a repeated field is seen as serde sees it."""


Field = tuple[str, Callable[[Any, str], Any], Any]


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise PolicyFormatError(f"{where}: invalid type, expected a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PolicyFormatError(f"{where}: a lone surrogate is not valid text") from None
    return value


def _variant(variants: tuple[str, ...]) -> Callable[[Any, str], str]:
    def parse(value: Any, where: str) -> str:
        # serde_json also takes a unit variant in its map form, `{"allow": null}`.
        if isinstance(value, _Object) and len(value) == 1 and value[0][1] is None:
            value = value[0][0]
        if not isinstance(value, str):
            raise PolicyFormatError(f"{where}: invalid type, expected one of {variants}")
        if value not in variants:
            raise PolicyFormatError(
                f"{where}: unknown variant `{value}`, expected one of {variants}"
            )
        return value

    return parse


def _vec(item: Callable[[Any, str], Any]) -> Callable[[Any, str], list[Any]]:
    def parse(value: Any, where: str) -> list[Any]:
        if not isinstance(value, list) or isinstance(value, _Object):
            raise PolicyFormatError(f"{where}: invalid type, expected a sequence")
        return [item(x, f"{where}[{i}]") for i, x in enumerate(value)]

    return parse


def _struct(name: str, fields: tuple[Field, ...]) -> Callable[[Any, str], dict[str, Any]]:
    """A serde-derived struct: a map of named fields (unknown ones ignored, repeated ones
    refused) or, as serde_json also accepts, a sequence of the fields in order."""

    def parse(value: Any, where: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if isinstance(value, _Object):
            known = {f[0]: f for f in fields}
            for key, item in value:
                if key not in known:
                    continue
                if key in out:
                    raise PolicyFormatError(f"{where}: duplicate field `{key}`")
                out[key] = known[key][1](item, f"{where}.{key}")
        elif isinstance(value, list):
            if len(value) > len(fields):
                raise PolicyFormatError(
                    f"{where}: invalid length {len(value)}, expected {name} with "
                    f"{len(fields)} elements"
                )
            for (key, field_parse, _default), item in zip(fields, value, strict=False):
                out[key] = field_parse(item, f"{where}.{key}")
        else:
            raise PolicyFormatError(f"{where}: invalid type, expected struct {name}")
        result = {}
        for key, _parse, default in fields:
            if key in out:
                result[key] = out[key]
            elif default is not _MISSING:
                result[key] = default
            else:
                raise PolicyFormatError(f"{where}: missing field `{key}`")
        return result

    return parse


_RULE = _struct(
    "Rule", (("act", _variant(ACTS), _MISSING), ("effect", _variant(EFFECTS), _MISSING),
             ("pattern", _string, _MISSING)),
)  # fmt: skip
_LAYER = _struct("Layer", (("name", _string, _MISSING), ("rules", _vec(_RULE), _MISSING)))
_DEFAULTS = _struct(
    "Defaults", (("read", _variant(EFFECTS), _MISSING), ("write", _variant(EFFECTS), _MISSING),
                 ("exec", _variant(EFFECTS), _MISSING), ("net", _variant(EFFECTS), "deny")),
)  # fmt: skip
_POLICY = _struct("Policy", (("layers", _vec(_LAYER), _MISSING), ("defaults", _DEFAULTS, _MISSING)))


def _no_constant(name: str) -> Any:
    raise PolicyFormatError(f"{name} is not a JSON number")


def parse_policy(document: str) -> dict[str, Any]:
    """Read policy JSON text as upstream's `Policy` does; the policy with every field in
    upstream's order (`net` filled in for an older policy). Raises `PolicyFormatError`."""
    try:
        value = json.loads(document, object_pairs_hook=_Object, parse_constant=_no_constant)
    except ValueError as exc:
        if isinstance(exc, PolicyFormatError):
            raise
        raise PolicyFormatError(f"not valid JSON: {exc}") from None
    return _POLICY(value, "policy")


def policy_document(policy: Mapping[str, Any] | str) -> str:
    """The JSON text upstream writes for a policy given as JSON text or a mapping: checked
    as `parse_policy` checks it, then serialised as serde serialises the struct (compact,
    fields in declaration order, unknown fields dropped). Raises `PolicyFormatError`."""
    if isinstance(policy, str):
        document = policy
    elif isinstance(policy, Mapping):
        try:
            document = json.dumps(policy, allow_nan=False, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise PolicyFormatError(f"not representable as JSON: {exc}") from None
    else:
        raise PolicyFormatError(
            f"invalid type {type(policy).__name__}, expected a mapping or JSON text"
        )
    return json.dumps(parse_policy(document), ensure_ascii=False, separators=(",", ":"))
