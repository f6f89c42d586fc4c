"""The migration environment takes the connection it is handed, or refuses: a `connection`
attribute is used whatever object carries it (a SQLAlchemy `Connection` or `Engine`, or a
wrapper holding one, as test harnesses hand over), and anything else stops the command with
`MigrationConnectionError` before any database is touched. Once a connection was handed over,
the target never falls back to `-x db`, `$HARNESS_STORE_URL` or `./runs.sqlite3`; without one,
a plain `alembic` run keeps that order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from pytest_alembic.tests.experimental.downgrade_leaves_no_trace import WrappingConnection
from sqlalchemy import Connection, Engine, create_engine, inspect, text

from harness_store import Store
from harness_store.engine import to_url
from harness_store.errors import MigrationConnectionError
from harness_store.releases import HEAD
from harness_store.schema import migrate

REPO = Path(__file__).resolve().parents[2]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def real_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A head store holding a run, named by `$HARNESS_STORE_URL` (and the default
    `./runs.sqlite3` beside it as well, the working directory being its folder): the database
    a fallback would land on."""
    folder = tmp_path / "real"
    folder.mkdir()
    path = folder / "runs.sqlite3"
    with Store.open(path) as store:
        store.start_run("kept", "f.txt")
    monkeypatch.setenv("HARNESS_STORE_URL", str(path))
    monkeypatch.chdir(folder)
    yield path


def repository_config() -> Config:
    """The repository's own `alembic.ini`, as a test harness loads it."""
    return Config(str(REPO / "alembic.ini"))


def revision_of(target: str) -> str | None:
    engine = create_engine(to_url(target))
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("alembic_version"):
                return None
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        engine.dispose()


@dataclass
class Holder:
    """A harness's own wrapper: the engine in an attribute of its own name, nothing else."""

    engine: Engine


@contextmanager
def scratch(target: str) -> Iterator[Engine]:
    migrate.upgrade(target, backup=False)
    engine = create_engine(to_url(target))
    try:
        yield engine
    finally:
        engine.dispose()


def test_a_wrapped_connection_is_the_one_downgraded(store_target: str, real_store: Path) -> None:
    """The issue's scenario: `command.downgrade(config, "0.13")` with the repository's
    `alembic.ini` and pytest-alembic's wrapper around a scratch database downgrades the scratch
    database, and the real store `$HARNESS_STORE_URL` names is untouched."""
    before = sha256(real_store)
    config = repository_config()
    with scratch(store_target) as engine, engine.connect() as conn:
        config.attributes["connection"] = WrappingConnection(conn)
        command.downgrade(config, "0.13")
        conn.commit()
    assert revision_of(store_target) == "0.13"
    assert sha256(real_store) == before
    assert revision_of(str(real_store)) == HEAD


def test_an_engine_held_by_a_wrapper_is_the_one_upgraded(
    store_target: str, real_store: Path
) -> None:
    before = sha256(real_store)
    config = repository_config()
    with scratch(store_target) as engine:
        config.attributes["connection"] = Holder(engine)
        command.downgrade(config, "0.13")
        assert revision_of(store_target) == "0.13"
        command.upgrade(config, "head")
    assert revision_of(store_target) == HEAD
    assert sha256(real_store) == before


class NotAConnection:
    """Something that neither is nor holds a SQLAlchemy Connection or Engine."""

    def __init__(self, url: str) -> None:
        self.url = url


def async_engine() -> Any:
    """An `AsyncEngine` (never connected): only `run_sync`'s plain connection is usable."""
    from sqlalchemy.ext.asyncio import create_async_engine

    return create_async_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")


@pytest.mark.parametrize(
    "given",
    [NotAConnection("sqlite:///elsewhere.sqlite3"), "db.sqlite3", 7, async_engine()],
    ids=["object", "str", "int", "AsyncEngine"],
)
def test_anything_else_handed_over_is_refused_by_name(real_store: Path, given: Any) -> None:
    before = sha256(real_store)
    config = repository_config()
    config.attributes["connection"] = given
    with pytest.raises(MigrationConnectionError) as raised:
        command.downgrade(config, "0.13")
    assert type(given).__name__ in str(raised.value)
    assert sha256(real_store) == before
    assert revision_of(str(real_store)) == HEAD
    assert sorted(p.name for p in real_store.parent.iterdir()) == ["runs.sqlite3"]


@pytest.mark.slow_on("postgresql")
def test_a_plain_connection_and_engine_still_work(store_target: str, real_store: Path) -> None:
    before = sha256(real_store)
    with scratch(store_target) as engine:
        config = repository_config()
        config.attributes["connection"] = engine
        command.downgrade(config, "0.13")
        with engine.connect() as conn:
            assert isinstance(conn, Connection)
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
            conn.commit()
    assert revision_of(store_target) == HEAD
    assert sha256(real_store) == before
