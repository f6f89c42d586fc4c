"""Fixtures of the command's tests: stores at every revision of the chain, on both backends,
and the sample of revisions the default tier sweeps."""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Container, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from support import legacy

from harness_store.releases import REVISIONS
from harness_store.schema import migrate

FIRST_READABLE = REVISIONS.index("0.13")
OLDER_SAMPLED = ("0.1", "0.7", "0.12")
"""Revisions below 0.13 (refused by the read commands) that the tests open."""
CHAIN = (*OLDER_SAMPLED, *REVISIONS[FIRST_READABLE:])
"""The revisions a store is built at: a few below 0.13 and every one from 0.13 to head."""
SAMPLE = ("0.1", "0.13", "0.37", "0.65", REVISIONS[-1])
"""The revisions the default tier sweeps: the oldest (refused), the first readable, one between,
the newest upstream release and head. The `slow` tier sweeps all of `CHAIN`."""


def sampled_revisions(revisions: Iterable[str]) -> list[Any]:
    """`revisions` as parameters, those outside `SAMPLE` marked `slow`."""
    return [pytest.param(r, marks=() if r in SAMPLE else pytest.mark.slow, id=r) for r in revisions]


def collected_revisions(session: pytest.Session) -> set[str]:
    """The revisions this session's tests ask for (every one of `CHAIN` when none says): a
    chain fixture copies a store at those only."""
    asked = {
        str(item.callspec.params["revision"])
        for item in session.items
        if "revision" in getattr(getattr(item, "callspec", None), "params", {})
    }
    return asked or set(CHAIN)


DRIVER_WORDS = re.compile(
    r"OperationalError|ProgrammingError|UndefinedColumn|UndefinedTable|no such (table|column)"
    r"|Traceback|psycopg\.|sqlite3\."
)
"""What a driver error looks like when it leaks to a user."""


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


def build_sqlite_chain(directory: Path, wanted: Container[str] = CHAIN) -> dict[str, str]:
    """A SQLite store file at each revision of `CHAIN` that is `wanted`, built by upgrading one
    file step by step and copying it at each."""
    work = directory / "work.sqlite3"
    built: dict[str, str] = {}
    for index, revision in enumerate(CHAIN):
        migrate.upgrade(str(work), revision, backup=False)
        if index == 0:
            seed(f"sqlite:///{work}")
        if revision not in wanted:
            continue
        target = directory / f"at-{revision}.sqlite3"
        shutil.copyfile(work, target)
        built[revision] = str(target)
    return built


def build_pg_chain(server: str, wanted: Container[str] = CHAIN) -> Iterator[dict[str, str]]:
    """A PostgreSQL database at each revision of `CHAIN` that is `wanted` (copies of one
    upgraded step by step, `CREATE DATABASE … TEMPLATE`); all dropped afterwards."""
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
            if revision not in wanted:
                continue
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
def sqlite_chain(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> dict[str, str]:
    """Revision → a SQLite store at it, for the revisions the session's tests ask for (read
    them only: they are shared by the session)."""
    return build_sqlite_chain(
        tmp_path_factory.mktemp("chain"), collected_revisions(request.session)
    )


@pytest.fixture(scope="session")
def pg_chain(pg_server_url: str, request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """Revision → a PostgreSQL database at it, for the revisions the session's tests ask for;
    or skip without a server."""
    yield from build_pg_chain(pg_server_url, collected_revisions(request.session))


@pytest.fixture
def torn(tmp_path: Path) -> Path:
    """A store whose 0.7 open was killed midway (0.6 complete, part of 0.7)."""
    path = tmp_path / "torn.sqlite3"
    legacy.build_torn(path, "0.7", legacy.torn_points("0.7")[0])
    return path


@pytest.fixture
def born_05(tmp_path: Path) -> Path:
    path = tmp_path / "born-0.5.sqlite3"
    legacy.build_born_at(path, "0.5")
    return path


@pytest.fixture
def born_013(tmp_path: Path) -> Path:
    """An untracked store as io-harness 0.13 leaves it, full of awkward text."""
    path = tmp_path / "born-0.13.sqlite3"
    legacy.build_born_at(path, "0.13")
    return path
