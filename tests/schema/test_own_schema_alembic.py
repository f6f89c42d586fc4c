"""The chain run by Alembic in a PostgreSQL schema of its own: `alembic -x schema=NAME` (strictly
parsed, refused on SQLite) and a connection an application hands over in a transaction
(`alembic_config(schema=…)`), which the schema is set for alone. `alembic check` then finds
nothing to do, and the application's schema is left as it was.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from argparse import Namespace
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy import Engine, text
from support.app_database import tables_in
from support.provided import unavailable

from harness_store.errors import MigrationConnectionError, MigrationOptionError
from harness_store.releases import HEAD
from harness_store.schema import alembic_config
from harness_store.schema.x_options import parse_x_options

REPO = Path(__file__).resolve().parents[2]


def x_config(*options: str) -> Config:
    """The repository's `alembic.ini` with `-x` options, as Alembic's command line builds it."""
    return Config(str(REPO / "alembic.ini"), cmd_opts=Namespace(x=list(options)))


def version_in(engine: Engine, schema: str) -> str | None:
    with engine.connect() as conn:
        query = text(f"SELECT version_num FROM {schema}.alembic_version")
        return conn.execute(query).scalar()


def test_alembic_x_schema_upgrades_and_checks_in_a_schema_of_its_own(
    pg_url: str, admin: Engine
) -> None:
    command.upgrade(x_config(f"db={pg_url}", "schema=harness"), "head")
    assert version_in(admin, "harness") == HEAD
    assert tables_in(admin, "public") == {"app_users"}
    command.check(x_config(f"db={pg_url}", "schema=harness"))  # raises on any difference


def test_alembic_x_schema_is_refused_on_sqlite_creating_nothing(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with pytest.raises(CommandError, match="schema"):
        command.upgrade(x_config(f"db={path}", "schema=harness"), "head")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["Harness", "a;b", "pg_x"])
def test_an_x_schema_that_is_no_plain_identifier_is_refused(value: str) -> None:
    with pytest.raises(MigrationOptionError, match="schema"):
        parse_x_options([f"schema={value}"])


def test_a_connection_handed_over_in_a_transaction_is_upgraded_in_the_schema(
    admin: Engine,
) -> None:
    """An application's own connection (Alembic's cookbook): the chain runs in our schema
    inside the application's transaction, and the application's later transactions work in
    its own schema again."""
    config = alembic_config(schema="harness")
    with admin.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
    assert version_in(admin, "harness") == HEAD
    assert tables_in(admin, "public") == {"app_users"}
    with admin.connect() as conn:
        assert conn.execute(text("SELECT current_schema()")).scalar() == "public"
    with admin.begin() as conn:
        config.attributes["connection"] = conn
        command.check(config)


def test_a_connection_handed_over_outside_a_transaction_is_refused(admin: Engine) -> None:
    """A session-wide `search_path` would outlive the upgrade: refused, nothing created."""
    config = alembic_config(schema="harness")
    with admin.connect() as conn:
        config.attributes["connection"] = conn
        with pytest.raises(MigrationConnectionError, match="transaction"):
            command.upgrade(config, "head")
    with admin.connect() as conn:
        found = conn.execute(text("SELECT 1 FROM pg_namespace WHERE nspname = 'harness'"))
        assert found.first() is None


def test_an_offline_script_for_a_schema_of_its_own_creates_it_and_works_in_it(
    pg_url: str, admin: Engine
) -> None:
    """`alembic -x schema=NAME upgrade head --sql`: the script is applied by whoever runs
    `psql`, in whatever schema their session has; it creates the schema and works in it
    itself, for its own transaction."""
    out = io.StringIO()
    config = x_config(f"db={pg_url}", "schema=harness")
    config.output_buffer = out
    command.upgrade(config, "head", sql=True)
    script = out.getvalue()
    psql = shutil.which("psql")
    if psql is None:
        unavailable("psql is not installed")
    plain = pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
    done = subprocess.run([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", plain],
                          input=script, text=True, capture_output=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert version_in(admin, "harness") == HEAD
    assert tables_in(admin, "public") == {"app_users"}
    with admin.connect() as conn:
        assert conn.execute(text("SELECT current_schema()")).scalar() == "public"
