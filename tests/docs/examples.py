"""Reading the Python examples out of the README and the documentation pages.

A page's examples are its ```python blocks, in order; a block whose previous non-blank line is
`<!-- example: skip -->` is left out (kept for blocks that need a network server), and one
after `<!-- example: postgresql -->` runs against a PostgreSQL database of its own
(`postgresql_blocks`, `tests/docs/test_postgresql_examples.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIP = "<!-- example: skip -->"
POSTGRESQL = "<!-- example: postgresql -->"
EXAMPLE_URL = "postgresql+psycopg://agent@db.internal/runs"
"""The URL a PostgreSQL example names, which its test replaces with a database's of its own."""
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page: its language, first line number and text."""

    lang: str
    line: int
    code: str
    skipped: bool
    postgresql: bool = False


def pages() -> list[Path]:
    """The README and every Markdown page of the site, in a stable order."""
    docs = REPO / "docs"
    found = sorted(p for p in docs.rglob("*.md") if p.relative_to(docs).parts[0][0] not in "_.")
    return [REPO / "README.md", *found]


def blocks(text: str) -> list[Block]:
    """Every fenced block of a Markdown text, with whether a skip marker precedes it."""
    lines = text.splitlines()
    found: list[Block] = []
    previous = ""
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if match is None:
            if lines[index].strip():
                previous = lines[index].strip()
            index += 1
            continue
        indent, fence, lang = len(match["indent"]), match["fence"], match["lang"]
        start = index + 1
        index = start
        while index < len(lines) and not lines[index].strip().startswith(fence):
            index += 1
        body = "\n".join(line[indent:] for line in lines[start:index]) + "\n"
        found.append(Block(lang, start, body, previous == SKIP, previous == POSTGRESQL))
        previous = ""
        index += 1
    return found


def python_blocks(page: Path) -> list[Block]:
    """The page's ```python blocks that are to be run, in order."""
    return [
        b
        for b in blocks(page.read_text())
        if b.lang == "python" and not b.skipped and not b.postgresql
    ]


def postgresql_blocks(page: Path) -> list[Block]:
    """The page's ```python blocks that run against PostgreSQL, in order."""
    return [b for b in blocks(page.read_text()) if b.lang == "python" and b.postgresql]


def run_page(page: Path) -> dict[str, object]:
    """Run the page's examples in order in one namespace (in the current directory), as a
    reader pasting them into one session would; return the namespace."""
    namespace: dict[str, object] = {"__name__": "__main__"}
    for block in python_blocks(page):
        code = compile(block.code, f"{page}:{block.line}", "exec")
        exec(code, namespace)
    return namespace
