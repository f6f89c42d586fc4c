"""A reader for Rust's `{:?}` rendering, which the oracles after 0.13 dump values in (their
types mostly do not derive `Serialize`): structs `Name { a: 1 }`, tuple structs and variants
`Some(x)`, unit variants `None`, `Vec`s `[..]`, tuples `(..)`, maps `{k: v}`, strings and chars
with Rust's escapes, integers, floats and booleans.

A struct reads as a dict with its type under `"_type"`; a tuple struct or variant with one
field as `{"_type": name, "_0": value}` except `Some(x)`, which reads as `x` (and `None` as
None); a unit variant as its name.
"""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(
    r"\s*(?:(?P<num>-?\d+(?:\.\d+)?(?:e-?\d+)?)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<p>[{}()\[\],:]))"
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def peek(self) -> str:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1
        return self.text[self.pos : self.pos + 1]

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(
                f"expected {char!r} at {self.pos}: {self.text[self.pos : self.pos + 40]!r}"
            )
        self.pos += 1

    def quoted(self, quote: str) -> str:
        self.expect(quote)
        out = []
        text = self.text
        while text[self.pos] != quote:
            c = text[self.pos]
            if c == "\\":
                e = text[self.pos + 1]
                if e == "u":
                    end = text.index("}", self.pos)
                    out.append(chr(int(text[self.pos + 3 : end], 16)))
                    self.pos = end + 1
                    continue
                out.append(_ESCAPES[e])
                self.pos += 2
                continue
            out.append(c)
            self.pos += 1
        self.pos += 1
        return "".join(out)

    def items(self, close: str) -> list[Any]:
        out: list[Any] = []
        while self.peek() != close:
            out.append(self.value())
            if self.peek() == ",":
                self.pos += 1
        self.pos += 1
        return out

    def value(self) -> Any:
        c = self.peek()
        if c == '"':
            return self.quoted('"')
        if c == "'":
            return self.quoted("'")
        if c == "[":
            self.pos += 1
            return self.items("]")
        if c == "(":
            self.pos += 1
            return tuple(self.items(")"))
        if c == "{":
            self.pos += 1
            out = {}
            while self.peek() != "}":
                key = self.value()
                self.expect(":")
                out[key] = self.value()
                if self.peek() == ",":
                    self.pos += 1
            self.pos += 1
            return out
        m = _TOKEN.match(self.text, self.pos)
        if not m or m.group("p"):
            raise ValueError(
                f"unexpected input at {self.pos}: {self.text[self.pos : self.pos + 40]!r}"
            )
        self.pos = m.end()
        if m.group("num"):
            n = m.group("num")
            return float(n) if any(ch in n for ch in ".e") else int(n)
        name = m.group("name")
        if name in ("true", "false"):
            return name == "true"
        if name == "None":
            return None
        nxt = self.peek()
        if nxt == "(":
            self.pos += 1
            fields = self.items(")")
            if name == "Some" and len(fields) == 1:
                return fields[0]
            return {"_type": name, **{f"_{i}": f for i, f in enumerate(fields)}}
        if nxt == "{":
            if (
                self.text[self.pos + 1 :].lstrip()[:1] == '"'
            ):  # a map's Debug, e.g. `Object {"k": v}`
                return {"_type": name, "_0": self.value()}
            self.pos += 1
            out: dict[str, Any] = {"_type": name}
            while self.peek() != "}":
                field = _TOKEN.match(self.text, self.pos)
                assert field and field.group("name"), self.text[self.pos : self.pos + 40]
                self.pos = field.end()
                self.expect(":")
                out[field.group("name")] = self.value()
                if self.peek() == ",":
                    self.pos += 1
            self.pos += 1
            return out
        return name


def parse(text: str) -> Any:
    """The value a `{:?}` rendering stands for; raises ValueError on anything else."""
    reader = _Reader(text)
    value = reader.value()
    if reader.peek():
        raise ValueError(f"trailing input at {reader.pos}: {text[reader.pos : reader.pos + 40]!r}")
    return value
