"""What the command's tests share: running a command that must succeed or fail (one line,
the documented exit code; in this process, as what it says is the point, not its process),
and reading a store's bytes and rows without the package."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError
from support.clirun import run_in_process
from support.shared import FIXTURES

from harness_store.cli import read_only_url
from harness_store.engine import to_url

Copy = Callable[[str], Path]

EXIT_USAGE, EXIT_NOT_A_STORE, EXIT_LOCKED, EXIT_NOT_FOUND = 2, 3, 4, 5


def ok(*args: str | Path) -> str:
    """Run a command that must succeed; its stdout, checked to be plain text."""
    done = run_in_process(*args)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    return done.stdout


def as_json(*args: str | Path) -> Any:
    return json.loads(ok(*args, "--json"))


def fails(code: int, *args: str | Path, said: str = "") -> str:
    """Run a command that must fail with `code`: one line on stderr, no traceback, and on
    stdout nothing but `said` (`upgrade` says what it found before it starts)."""
    done = run_in_process(*args)
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness-store: error: "), done.stderr
    assert done.stdout.startswith(said) and done.stdout.count("\n") == bool(said), done.stdout
    return lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fixture_json(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def sql(path: Path, query: str, *args: object) -> list[tuple[Any, ...]]:
    """Rows read straight from the file with the standard library, read-only."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return conn.execute(query, args).fetchall()


def assert_read_only_url_refuses(target: str | Path, refusal: str) -> None:
    """A delete through `read_only_url(target)` is refused by the database itself."""
    engine = create_engine(read_only_url(to_url(target)))
    try:
        with engine.connect() as conn, pytest.raises(DBAPIError, match=refusal):
            conn.execute(text("DELETE FROM runs"))
    finally:
        engine.dispose()
