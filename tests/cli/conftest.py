"""Fixtures of the command's tests: stores at every revision of the chain, on both backends,
and the command run in this process with its output and exit code captured."""

from __future__ import annotations

import io
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from harness_store.cli import main
from harness_store.schema import migrate
from harness_store.schema.releases import REVISIONS

FIRST_READABLE = REVISIONS.index("0.13")
OLDER_SAMPLED = ("0.1", "0.7", "0.12")
"""Revisions below 0.13 (refused by the read commands) that the tests open."""
CHAIN = (*OLDER_SAMPLED, *REVISIONS[FIRST_READABLE:])
"""The revisions a store is built at: a few below 0.13 and every one from 0.13 to head."""

DRIVER_WORDS = re.compile(
    r"OperationalError|ProgrammingError|UndefinedColumn|UndefinedTable|no such (table|column)"
    r"|Traceback|psycopg\.|sqlite3\."
)
"""What a driver error looks like when it leaks to a user."""


@dataclass(frozen=True)
class Ran:
    """One run of the command: its exit code and what it wrote."""

    code: int
    out: str
    err: str


def run_cli(*args: object) -> Ran:
    """`harness-store ARGS` in this process, as `main` runs it (errors as one line)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    env = os.environ.pop("HARNESS_STORE_DEBUG", None)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        if env is not None:
            os.environ["HARNESS_STORE_DEBUG"] = env
    return Ran(code, out.getvalue(), err.getvalue())


def seed(url: str) -> None:
    """One run with one step, written at 0.1 so every later revision carries it."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO runs (goal, file) VALUES ('a goal', 'task.md')"))
            conn.execute(
                text(
                    "INSERT INTO steps (run_id, step, decision, result) VALUES (1, 1, 'read', 'ok')"
                )
            )
    finally:
        engine.dispose()


def build_sqlite_chain(directory: Path) -> dict[str, str]:
    """A SQLite store file at each revision of `CHAIN`, built by upgrading one file step by
    step and copying it at each."""
    work = directory / "work.sqlite3"
    built: dict[str, str] = {}
    for index, revision in enumerate(CHAIN):
        migrate.upgrade(str(work), revision, backup=False)
        if index == 0:
            seed(f"sqlite:///{work}")
        target = directory / f"at-{revision}.sqlite3"
        shutil.copyfile(work, target)
        built[revision] = str(target)
    return built


def build_pg_chain(server: str) -> Iterator[dict[str, str]]:
    """A PostgreSQL database at each revision of `CHAIN` (copies of one upgraded step by
    step, `CREATE DATABASE … TEMPLATE`); all dropped afterwards."""
    stem = f"hs_test_chain_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    names = [stem]
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{stem}"'))
        work = make_url(server).set(database=stem).render_as_string(hide_password=False)
        built: dict[str, str] = {}
        for index, revision in enumerate(CHAIN):
            migrate.upgrade(work, revision, backup=False)
            if index == 0:
                seed(work)
            name = f"{stem}_{revision.replace('.', '_')}"
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{stem}"'))
            names.append(name)
            built[revision] = (
                make_url(server).set(database=name).render_as_string(hide_password=False)
            )
        yield built
    finally:
        with admin.connect() as conn:
            for name in names:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def sqlite_chain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Revision → a SQLite store at it (read them only: they are shared by the session)."""
    return build_sqlite_chain(tmp_path_factory.mktemp("chain"))


@pytest.fixture(scope="session")
def pg_chain(pg_server_url: str) -> Iterator[dict[str, str]]:
    """Revision → a PostgreSQL database at it, or skip without a server."""
    yield from build_pg_chain(pg_server_url)
