"""A store in a PostgreSQL schema of its own, beside an application's tables in one database:
every entry (`Store.open`, `AsyncStore.open`, `upgrade`) takes `schema=`, every table of ours
and `alembic_version` land in it, and the application's own schema is neither read nor
judged. On SQLite there is no schema to name: it is refused with a typed error, before
anything is created. A name that is not a plain PostgreSQL identifier is refused the same way.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, make_url, text
from support.app_database import tables_in

from harness_store import AsyncStore, ProviderCall, StepRecord, Store, Usage
from harness_store.engine import make_engine
from harness_store.errors import InvalidTargetError, SchemaError, StoreAccessError
from harness_store.releases import HEAD
from harness_store.schema import upgrade
from harness_store.targets import Target


def schemas(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT nspname FROM pg_namespace"))
        return {str(name) for name in rows.scalars()}


def test_a_store_in_a_schema_of_its_own_lives_beside_the_applications_tables(
    pg_url: str, admin: Engine
) -> None:
    with Store.open(pg_url, schema="harness") as store:
        run = store.start_run("goal", "out.txt")
    ours = tables_in(admin, "harness")
    assert {"runs", "steps", "alembic_version"} <= ours
    assert tables_in(admin, "public") == {"app_users"}
    with admin.connect() as conn:
        version = text("SELECT version_num FROM harness.alembic_version")
        assert conn.execute(version).scalar() == HEAD
    with Store.open(pg_url, schema="harness", read_only=True) as reader:
        assert reader.runs() == [run]


def test_the_applications_own_schema_is_still_refused_as_a_store(
    pg_url: str, admin: Engine
) -> None:
    """The contrast: without a schema of its own the store would share the application's,
    whose tables are not a store: refused, nothing created."""
    with pytest.raises(SchemaError):
        Store.open(pg_url)
    assert tables_in(admin, "public") == {"app_users"}


def test_an_async_store_opens_in_a_schema_of_its_own(pg_url: str, admin: Engine) -> None:
    async def body() -> int:
        store = await AsyncStore.open(pg_url, schema="harness_async")
        try:
            run = await store.start_run("goal", "out.txt")
            assert (await store.runs()) == [run]
            return run
        finally:
            await store.close()

    asyncio.run(body())
    assert "runs" in tables_in(admin, "harness_async")
    assert tables_in(admin, "public") == {"app_users"}


def test_upgrade_creates_the_schema_and_the_chain_in_it(pg_url: str, admin: Engine) -> None:
    report = upgrade(pg_url, schema="harness")
    assert report.after == HEAD
    assert "alembic_version" in tables_in(admin, "harness")
    again = upgrade(pg_url, schema="harness")
    assert again.before == HEAD and not again.changed


def test_a_schema_is_refused_on_sqlite_before_anything_is_created(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with pytest.raises(InvalidTargetError, match="schema"):
        Store.open(path, schema="harness")
    with pytest.raises(InvalidTargetError, match="schema"):
        upgrade(path, schema="harness")
    with pytest.raises(InvalidTargetError, match="schema"):
        asyncio.run(AsyncStore.open(path, schema="harness"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "name", ["", "Harness", "harness-store", "a;drop", "1st", "pg_mine", "x" * 64, "a b"]
)
def test_a_schema_name_that_is_no_plain_identifier_is_refused(
    pg_url: str, admin: Engine, name: str
) -> None:
    before = schemas(admin)
    with pytest.raises(InvalidTargetError, match="schema"):
        Store.open(pg_url, schema=name)
    assert schemas(admin) == before


def test_the_schema_is_part_of_the_parsed_target(pg_url: str) -> None:
    target = Target.parse(pg_url, schema="harness")
    assert target.schema == "harness"
    assert Target.parse(target).schema == "harness"
    assert Target.parse(target.url).schema == "harness"  # it travels with the URL
    assert Target.parse(pg_url).schema is None
    with pytest.raises(InvalidTargetError, match="schema"):
        Target.parse(target, schema="other")


def test_a_schema_of_its_own_holding_someone_elses_table_is_refused(
    pg_url: str, admin: Engine
) -> None:
    """Only our schema is judged, and judged as strictly as a database: a table that is not a
    store's there is refused, nothing created beside it."""
    with admin.begin() as conn:
        conn.execute(text("CREATE SCHEMA harness"))
        conn.execute(text("CREATE TABLE harness.things (id INTEGER)"))
    with pytest.raises(SchemaError):
        Store.open(pg_url, schema="harness")
    assert tables_in(admin, "harness") == {"things"}


def test_a_connection_that_lost_its_schema_on_the_way_is_refused(
    pg_url: str, admin: Engine
) -> None:
    """A pooler that drops the startup option (PgBouncer does) leaves the connection in the
    application's schema: the upgrade refuses it before reading or writing anything there."""
    engine = make_engine(Target.parse(pg_url, schema="harness").url)

    @event.listens_for(engine, "connect")
    def dropped_on_the_way(dbapi_connection: Any, record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET search_path TO public")
        dbapi_connection.commit()

    try:
        with engine.begin() as conn, pytest.raises(InvalidTargetError, match="did not reach"):
            upgrade(pg_url, schema="harness", connection=conn)
    finally:
        engine.dispose()
    assert tables_in(admin, "public") == {"app_users"}
    assert "harness" not in schemas(admin)


def test_the_spend_triggers_work_from_a_session_in_another_schema(
    pg_url: str, admin: Engine
) -> None:
    """The application's own session (or an administrator's) deleting the store's provider
    calls, schema-qualified: the triggers' functions find the store's counters in the
    store's schema, not in the session's."""
    with Store.open(pg_url, schema="harness") as store:
        run = store.start_run("goal", "out.txt")
        store.checkpoint_step(run, StepRecord.new(1, "d", "r"))
        store.record_provider_call(run, ProviderCall(1, 1, "a", "m", Usage(1, 1, 2), 5))
    with admin.begin() as conn:
        conn.execute(text("DELETE FROM harness.provider_calls"))
    with Store.open(pg_url, schema="harness") as store:
        assert store.check().findings == ()


def test_a_role_that_may_not_create_the_schema_is_told_so(pg_url: str, admin: Engine) -> None:
    """The first upgrade creates the schema; a role without the right to is refused with a
    typed error that says what to grant, nothing created."""
    role = f"hs_no_schema_{uuid.uuid4().hex[:12]}"
    with admin.begin() as conn:
        conn.execute(text(f"CREATE ROLE {role} LOGIN"))
    try:
        as_role = make_url(pg_url).set(username=role, password=None)
        with pytest.raises(StoreAccessError, match="CREATE ON DATABASE"):
            Store.open(as_role, schema="harness")
        assert "harness" not in schemas(admin)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP ROLE {role}"))
