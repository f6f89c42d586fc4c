"""`harness-store` error lines: commands they suggest can be pasted as they are, passwords never
appear (not even a tail cut off at an `@`), and names read from a hostile database are shown
escaped, so an error line cannot drive the terminal."""

from __future__ import annotations

import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

from sqlalchemy.engine import make_url
from support import legacy
from support.clirun import COMMAND, environ, run_in_process

from harness_store.schema.migrate import upgrade


def error_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness-store: error: "), done.stderr
    return lines[0]


def test_a_password_with_an_at_sign_leaks_nothing() -> None:
    url = "postgresql://someone:pa@ss@w0rd-tail@nohost.invalid:5432/db"
    done = run_in_process("runs", url)
    line = error_line(done, 2)
    assert "w0rd-tail" not in done.stderr and "ss@" not in done.stderr
    assert "%40" in line  # says how to write it


def test_a_suggested_command_is_pasteable_without_the_password(pg_url: str) -> None:
    upgrade(pg_url, "0.5", backup=False)
    secret = make_url(pg_url).set(password="s3cr3t-pw").render_as_string(hide_password=False)
    line = error_line(run_in_process("runs", secret), 3)
    assert "s3cr3t-pw" not in line
    commands = line.split("`")[1::2]
    assert commands == ['harness-store upgrade "$HARNESS_STORE_URL"'], line
    # The command works as suggested once the variable holds the URL.
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" upgrade "$HARNESS_STORE_URL"', "sh", *COMMAND],
        capture_output=True,
        text=True,
        env=environ({"HARNESS_STORE_URL": secret}),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "s3cr3t-pw" not in done.stdout + done.stderr


def test_a_suggested_path_is_quoted_for_the_shell(tmp_path: Path) -> None:
    path = tmp_path / "my runs; (old).sqlite3"
    legacy.build_born_at(path, "0.5")
    line = error_line(run_in_process("runs", path), 3)
    command = line.split("`")[1]
    done = subprocess.run(
        [
            "sh",
            "-c",
            command.replace("harness-store", '"$0" -m harness_store.cli', 1),
            *COMMAND[:1],
        ],
        capture_output=True,
        text=True,
        env=environ(),
        timeout=300,
    )
    assert done.returncode == 0, (command, done.stderr)


def test_hostile_names_are_escaped_in_error_lines(tmp_path: Path) -> None:
    path = tmp_path / "hostile.sqlite3"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute('CREATE TABLE "evil\x1b[2J\u202egnp.exe" (x)')
        conn.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, goal TEXT)")
        conn.commit()
    for command in ("runs", "inspect", "upgrade"):
        done = run_in_process(command, path)
        assert done.returncode == 3, done.stderr
        assert "\x1b" not in done.stderr and "\u202e" not in done.stderr
        assert "\\x1b[2J" in done.stderr and "\\u202e" in done.stderr
