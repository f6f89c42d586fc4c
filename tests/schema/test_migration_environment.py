"""The migration environment takes the connection it is handed, or refuses: a `connection`
attribute is used whatever object carries it (a SQLAlchemy `Connection` or `Engine`, or a
wrapper holding one, as test harnesses hand over), and anything else stops the command with
`MigrationConnectionError` before any database is touched. Once a connection was handed over,
the target never falls back to `-x db`, `$HARNESS_STORE_URL` or `./runs.sqlite3`; without one,
a plain `alembic` run keeps that order.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
from argparse import Namespace
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from alembic.util import CommandError
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


# --- `-x` options ----------------------------------------------------------------------------


def alembic_x(*options: str) -> list[str]:
    """`alembic -c alembic.ini -x OPTION … upgrade head`, the real command line."""
    alembic = Path(sys.executable).with_name("alembic")
    x = [arg for option in options for arg in ("-x", option)]
    return [str(alembic), "-c", str(REPO / "alembic.ini"), *x, "upgrade", "head"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["url=postgresql+psycopg://nobody@127.0.0.1:1/none"], "url"),
        (["backup=nope"], "nope"),
        (["db"], "db"),
        (["db=postgresql+psycopg://someone:secret@127.0.0.1:notaport/db"], "db"),
    ],
    ids=["unknown key", "unparseable backup", "no value", "unparseable db"],
)
def test_a_mistyped_x_option_is_refused_creating_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: list[str], named: str
) -> None:
    """`-x url=…` for `-x db=…` used to upgrade `./runs.sqlite3` (creating it) and exit 0;
    a mistyped option stops Alembic's command line with one `FAILED:` line that names it
    and lists the known ones, exit 255, no traceback, nothing created."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_STORE_URL", raising=False)
    done = subprocess.run(alembic_x(*options), capture_output=True, text=True, timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode == 255, said
    assert "Traceback" not in said, said
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED: ")]
    assert len(failed) == 1, said
    assert named in failed[0] and "db=" in failed[0] and "backup=" in failed[0], failed
    assert "secret" not in said
    assert list(tmp_path.iterdir()) == []


def x_config(*options: str) -> Config:
    """The repository's `alembic.ini` with `-x` options, as Alembic's command line builds it."""
    return Config(str(REPO / "alembic.ini"), cmd_opts=Namespace(x=list(options)))


@pytest.mark.parametrize("spelling", ["no", "0", "false", "off", "False"])
def test_backup_off_in_every_usual_spelling(tmp_path: Path, spelling: str) -> None:
    path = tmp_path / "runs.sqlite3"
    migrate.upgrade(path, "0.13", backup=False)
    command.upgrade(x_config(f"db={path}", f"backup={spelling}"), "head")
    assert revision_of(str(path)) == HEAD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.sqlite3"]


@pytest.mark.parametrize("options", [["db=a.sqlite3", "db=b.sqlite3"], ["db="], ["backup="]])
def test_an_option_given_twice_or_empty_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_STORE_URL", raising=False)
    with pytest.raises(CommandError, match="db=PATH_OR_URL"):
        command.upgrade(x_config(*options), "head")
    assert list(tmp_path.iterdir()) == []


# --- what was handed over decides, online and offline ---------------------------------------


def the_other_backend(store_target: str, tmp_path: Path) -> str:
    """A target of the other backend than `store_target`'s: what `$HARNESS_STORE_URL` names
    beside the engine handed over, which must never be read."""
    if store_target.startswith("postgresql"):
        return str(tmp_path / "elsewhere.sqlite3")
    return "postgresql+psycopg://nobody@127.0.0.1:1/none"


def test_offline_the_script_is_for_the_engine_handed_over(
    store_target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a PostgreSQL engine handed over and `$HARNESS_STORE_URL` naming a SQLite file, the
    script was rendered for SQLite (`AUTOINCREMENT`); it is rendered for the engine's dialect,
    and what the variable names is never created or touched."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_STORE_URL", the_other_backend(store_target, tmp_path))
    engine = create_engine(to_url(store_target))
    try:
        for handed in (engine, engine.connect()):
            out = io.StringIO()
            config = Config(str(REPO / "alembic.ini"), output_buffer=out)
            config.attributes["connection"] = handed
            command.upgrade(config, "0.13", sql=True)
            script = out.getvalue()
            sqlite = engine.dialect.name == "sqlite"
            assert ("AUTOINCREMENT" in script) is sqlite, script[:2000]
            assert ("SERIAL" in script) is not sqlite, script[:2000]
            if isinstance(handed, Connection):
                handed.close()
    finally:
        engine.dispose()
    assert {p.name for p in tmp_path.iterdir()} <= {"runs.sqlite3"}  # the SQLite engine's
    assert revision_of(store_target) is None


def test_a_malformed_url_beside_a_handed_connection_is_never_read(
    store_target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config carrying `cmd_opts` (as Alembic's command line builds it) and a malformed
    `$HARNESS_STORE_URL` failed the migration of the connection handed over; nothing but
    that connection is read once one is handed over."""
    monkeypatch.setenv("HARNESS_STORE_URL", "postgresql+psycopg://someone@127.0.0.1:notaport/db")
    with scratch(store_target) as engine:
        config = x_config()
        config.attributes["connection"] = engine
        command.downgrade(config, "0.13")
        assert revision_of(store_target) == "0.13"
        command.upgrade(config, "head")
    assert revision_of(store_target) == HEAD
