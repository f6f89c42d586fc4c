"""SQLite's "not a database" is known by its result code (26, SQLITE_NOTADB), translated by
the dialect into `NotADatabaseError`, never by its message text."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from harness_store.cli.app import EXIT_NOT_A_STORE, classify
from harness_store.dialects import backend_named
from harness_store.errors import NotADatabaseError


def not_a_database(tmp_path: Path) -> sqlite3.DatabaseError:
    """The driver's own error for a file that is no SQLite database."""
    path = tmp_path / "text.sqlite3"
    path.write_bytes(b"not a database\n" * 400)
    conn = sqlite3.connect(path)
    try:
        with pytest.raises(sqlite3.DatabaseError) as raised:
            conn.execute("SELECT * FROM sqlite_master").fetchall()
    finally:
        conn.close()
    return raised.value


def test_the_result_code_is_translated_into_a_typed_error(tmp_path: Path) -> None:
    exc = not_a_database(tmp_path)
    assert exc.sqlite_errorcode == 26
    typed = backend_named("sqlite").translate_error(exc)
    assert isinstance(typed, NotADatabaseError)
    assert str(typed).startswith("not a SQLite database: ")


def test_the_command_classifies_it_by_its_code_not_its_message(tmp_path: Path) -> None:
    exc = not_a_database(tmp_path)
    assert classify(exc) == (EXIT_NOT_A_STORE, f"not a SQLite database: {exc}")
    reworded = sqlite3.DatabaseError("the words changed")
    reworded.sqlite_errorcode = 26  # type: ignore[attr-defined]
    reworded.sqlite_errorname = "SQLITE_NOTADB"  # type: ignore[attr-defined]
    assert classify(reworded)[0] == EXIT_NOT_A_STORE
