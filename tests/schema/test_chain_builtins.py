"""pytest-alembic's built-in checks of the chain, on SQLite and PostgreSQL: one head, a clean
upgrade from nothing, every step down and up again, the models matching the DDL, and every
downgrade undoing its upgrade exactly (`test_downgrade_leaves_no_trace`, one of its
experimental tests: it hands the environment a wrapper around its connection, which
`harness_store.schema.given_connection` unwraps), and again in a schema of its own beside an
application's table.

The functions are imported from `pytest_alembic.tests` rather than collected by the plugin,
whose collector does not run on pytest 9.2 (see pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_alembic.config import Config
from pytest_alembic.tests import (
    test_model_definitions_match_ddl,
    test_single_head_revision,
    test_up_down_consistency,
    test_upgrade,
)
from pytest_alembic.tests.experimental import test_downgrade_leaves_no_trace
from sqlalchemy import Engine, text
from support.pg_databases import store_location

from harness_store.engine import make_engine
from harness_store.schema.migrate import alembic_config as packaged_config
from harness_store.schema.migrate import ignore_key_nullability
from harness_store.targets import Target

__all__ = [
    "test_downgrade_leaves_no_trace",
    "test_model_definitions_match_ddl",
    "test_single_head_revision",
    "test_up_down_consistency",
    "test_upgrade",
]

pytestmark = pytest.mark.slow_on("postgresql")
"""The PostgreSQL half walks the whole chain on a server, several times over: the slow tier's."""


@pytest.fixture
def alembic_config() -> Config:
    """The packaged chain, as `harness_store.schema.migrate` runs it (autogenerate sees the same
    filter `alembic check` does)."""
    return Config(
        config_options={
            "alembic_config": packaged_config(backup=False),
            "process_revision_directives": ignore_key_nullability,
        }
    )


@pytest.fixture(
    params=["sqlite", "postgresql", pytest.param("postgresql in a schema", marks=pytest.mark.slow)]
)
def alembic_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """A real file store, or a fresh PostgreSQL database, set up the harness_store way; or
    the store in a schema of its own (`harness`) of a database whose own schema holds an
    application's table, as a store sharing an application's database lives. The
    schema's run walks the chain as the PostgreSQL one does: the slow tier's."""
    backend = request.param.split()[0]
    locations = store_location(backend, tmp_path / "runs.sqlite3")
    target = next(locations)
    schema = "harness" if request.param.endswith("schema") else None
    engine = make_engine(Target.parse(target, schema=schema))
    try:
        if schema is not None:
            with engine.begin() as conn:
                conn.execute(text("CREATE TABLE public.app_users (id SERIAL PRIMARY KEY)"))
        yield engine
    finally:
        engine.dispose()
        locations.close()
