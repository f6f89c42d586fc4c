"""PostgreSQL: the shared backend for many hosts, in the same row formats as SQLite.

Time stamps are rendered by the server clock into upstream's exact text format; `user_version`
has no equivalent, so the checkpoint-format marker is a one-row table written by the 0.7
migration; upserts use `ON CONFLICT`; ids copied in explicitly are followed by `setval`.
"""

from __future__ import annotations

import hashlib
import itertools
import select
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Connection, Engine, Table, event, inspect, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import URL
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.dml import Insert

from ..errors import (
    DiskFullError,
    IntegerOverflowError,
    InvalidValueError,
    OriginOfAnotherRoleError,
    PrivilegeError,
    RunNotFoundError,
    StatementRefusedError,
    StoreAccessError,
    StoreConnectionError,
    StoreError,
    StoreLockedError,
    UnansweredError,
)
from ..formats import I64_MAX
from ..sqldefaults import NOW, STAMP_OF
from .base import FORMAT_TABLE, SPEND_DAY, SPEND_MODEL, SPEND_WATCHED, Backend
from .postgresql_roles import ORIGIN_OF_ANOTHER_ROLE, ROLE_TRIGGERS, keep_rules

UPGRADE_LOCK = (0x68735F75, 1)
"""The transaction-scoped advisory lock (two-key form) that serialises upgrades of one
database ('hs_u'; the two-key space never meets single-key locks)."""

MEMORY_KEY_BYTES = 2600
"""What a btree entry of memory's UNIQUE(workspace, key) can hold (PostgreSQL's limit is
about a third of an 8 KB page, after compression; this stays under it for any text)."""

LOCKED_STATES = frozenset({"55P03", "40P01", "40001"})
"""lock_not_available (lock timeout), deadlock_detected, serialization_failure."""
READ_ONLY_STATE = "25006"
FEW_ROWS = 500
"""Bulk rows into a table under row-level security up to which a plain INSERT batch costs less
than a temporary table and INSERT … SELECT."""
NEW_IDS = (
    "SELECT nextval(q.s) FROM (SELECT pg_get_serial_sequence(%s, 'id')::regclass AS s) AS q, "
    "generate_series(1, %s)"
)
"""Ids for as many new rows of a table (its name, the count), from its `id` column's sequence,
taken in one statement before the rows are written."""
PRIVILEGE_STATE = "42501"
"""insufficient_privilege: a grant or a row-level security policy refused the statement."""
FOREIGN_KEY_STATE = "23503"
OUT_OF_RANGE_STATE = "22003"
"""numeric_value_out_of_range: a BIGINT sum or cast past 64 bits."""
STEPS_RUN_FKEY = "steps_run_id_fkey"
LOGIN_CLASSES = frozenset({"28"})
"""Class 28: invalid_authorization_specification (a role or password the server refused)."""
NO_DATABASE_STATE = "3D000"
"""invalid_catalog_name: a database that does not exist."""
DISK_FULL_STATE = "53100"
"""disk_full."""
LOST_CLASSES = frozenset({"08"})
"""Class 08: connection exceptions."""
LOST_STATES = frozenset({"57P01", "57P02", "57P03"})
"""admin_shutdown (pg_terminate_backend, a fast shutdown), crash_shutdown, cannot_connect_now."""

MEMORY_LOCK_PREFIX = "harness_store.memory:"
"""Advisory-lock key space of memory workspaces (hashed with the workspace name)."""

PING_AFTER = 1.0
"""Seconds a kept connection may sit idle and still be reused without a ping (see
`PostgreSQLBackend.connection_alive`): a session ended while it sat idle is seen locally (its
socket is readable) once its backend has gone; the ping covers one told to end a moment
before and not yet gone, which matters only for a connection that sat idle long enough to be
reaped (and for one whose last call failed, which `HeldConnections` pings whatever its idle
time). A thread calling in a loop, or waiting its turn among others, never pays it."""
EMPTY_QUERY = 0
"""libpq's PGRES_EMPTY_QUERY: the answer to an empty query string (the ping)."""
CONNECTION_OK = 0
"""libpq's CONNECTION_OK."""

ASYNC_PING_AFTER = PING_AFTER
"""Seconds an asyncio pool connection may sit idle and be handed out again without a ping
(see `PostgreSQLBackend.install_async`), as for a sync Store's kept connections."""
USED = "hs_used"
"""Pool record `info` key: when the connection was last given back (`time.monotonic()`)."""

CLOCK = NOW["postgresql"]
STAMP = STAMP_OF["postgresql"]


SEARCH_PATH = "-csearch_path="
"""The libpq option that keeps a store in a schema of its own: every connection of its URL
starts with that schema as its whole `search_path`, so every statement (the Store's, the
upgrade's, `alembic_version`'s) lands in it unqualified, and the schema others use is never
seen."""


def _options(url: URL) -> str:
    """The URL's libpq `options`, as one string."""
    options = url.query.get("options")
    return options if isinstance(options, str) else " ".join(options or ())


def with_own_schema(url: URL, schema: str) -> URL:
    """`url` whose connections work in `schema` (a name checked by the caller: a plain
    identifier, never quoted)."""
    return url.update_query_dict({"options": f"{_options(url)} {SEARCH_PATH}{schema}".strip()})


def own_schema_of(url: URL) -> str | None:
    """The schema `with_own_schema` gave `url` (as written, unchecked), else None."""
    found = [o[len(SEARCH_PATH) :] for o in _options(url).split() if o.startswith(SEARCH_PATH)]
    return found[-1] if found else None


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLSTATE of a psycopg error (None for any other error, or one without): the one
    reader of a PostgreSQL error's code, which the translation reads (`translate_error`)."""
    state = getattr(exc, "sqlstate", None)
    return state if isinstance(state, str) else None


def create_own_schema(conn: Connection, schema: str) -> bool:
    """Create `schema` (a checked name) unless it exists, by the connected role, which then
    owns it; whether it was created. Looked up first: `CREATE SCHEMA IF NOT EXISTS` needs
    the right to create schemas even when it has nothing to do. A role that may not create
    it gets the translation's `PrivilegeError`, saying what to grant."""
    exists = text("SELECT 1 FROM pg_namespace WHERE nspname = :name")
    if conn.execute(exists, {"name": schema}).first() is not None:
        return False
    try:
        conn.execute(text(f"CREATE SCHEMA IF NOT EXISTS {schema}"))
    except Exception as exc:
        refused = PostgreSQLBackend().translate_error(exc)
        if not isinstance(refused, PrivilegeError):
            raise
        raise PrivilegeError(
            f"the store's schema {schema} does not exist, and this role may not create it: "
            f"grant it CREATE ON DATABASE {conn.engine.url.database} for the first upgrade, "
            f"or create the schema beforehand (CREATE SCHEMA {schema} AUTHORIZATION …); "
            "nothing was changed"
        ) from None
    return True


def work_in_own_schema(conn: Connection, schema: str) -> None:
    """Make `schema` (a checked name) the whole `search_path` of `conn`'s open transaction
    (`SET LOCAL`: it ends with the transaction): a connection handed over to the upgrade."""
    conn.execute(text("SELECT set_config('search_path', :schema, true)"), {"schema": schema})


def own_schema_script(schema: str) -> list[str]:
    """What an offline script (`upgrade --sql`) for a store in `schema` (a checked name) runs
    first, inside its transaction: the schema created unless it exists (looked up first, as
    online), then made the whole `search_path` of that transaction alone, whatever schema the
    session that applies the script works in."""
    return [
        f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = '{schema}') "
        f"THEN CREATE SCHEMA {schema}; END IF; END $$",
        f"SET LOCAL search_path TO {schema}",
    ]


def search_path(conn: Connection) -> str:
    """The `search_path` `conn` works with: the schema of its own a store's URL gave it,
    unless something on the way (a pooler) dropped the startup option."""
    return str(conn.execute(text("SELECT current_setting('search_path')")).scalar())


def database_exists(conn: Connection, name: str) -> bool:
    """Whether the server `conn` is connected to has a database called `name`."""
    named = text("SELECT 1 FROM pg_database WHERE datname = :name")
    return conn.execute(named, {"name": name}).first() is not None


class PostgreSQLBackend(Backend):
    """The server backend: pooled connections, server clock, `ON CONFLICT` upserts."""

    name = "postgresql"
    held_connections = 16
    """Up to one per thread calling at once (connections are opened as threads need them),
    taken from the pool; the pool's own connections stay for reads and transactions."""
    native_async = True
    loop_ping_after = ASYNC_PING_AFTER
    statement_parameters = 65_535
    """libpq's protocol: a statement's parameter count is a 16-bit number."""
    own_triggers = ROLE_TRIGGERS

    def own_schema_of(self, url: URL) -> str | None:
        return own_schema_of(url)

    def with_own_schema(self, url: URL, schema: str) -> URL:
        return with_own_schema(url, schema)

    def create_own_schema(self, conn: Connection, schema: str) -> bool:
        return create_own_schema(conn, schema)

    def work_in_own_schema(self, conn: Connection, schema: str) -> None:
        work_in_own_schema(conn, schema)

    def own_schema_script(self, schema: str) -> list[str]:
        return own_schema_script(schema)

    def search_path(self, conn: Connection) -> str:
        return search_path(conn)

    def database_exists(self, conn: Connection, name: str) -> bool:
        return database_exists(conn, name)

    def keep_rules(self, conn: Connection) -> None:
        keep_rules(conn)

    def engine_options(
        self, url: URL, *, synchronous: str | None, busy_timeout: float | None = None
    ) -> dict[str, Any]:
        # A small pool per process: many agent processes share one server, and each
        # process's Store runs one write at a time per thread.
        return {
            "pool_size": 5,
            "max_overflow": 5 + self.held_connections,
            "pool_pre_ping": True,
            "pool_recycle": 1800,
        }

    def async_engine_options(
        self, url: URL, *, synchronous: str | None, busy_timeout: float | None = None
    ) -> dict[str, Any]:
        """The sync pool's options without `pool_pre_ping` (a round trip per checkout, a third
        of a checkpoint's time): `install_async` checks connections instead. LIFO, so a busy
        pool keeps reusing its warmest connections."""
        options = self.engine_options(url, synchronous=synchronous, busy_timeout=busy_timeout)
        return {**options, "pool_pre_ping": False, "pool_use_lifo": True}

    def install_async(
        self, engine: Engine, *, synchronous: str | None, busy_timeout: float | None = None
    ) -> None:
        """Check each connection the asyncio pool hands out, as the kept connections of a sync
        Store are checked (`connection_alive`): a closed one, or one whose socket is readable
        (the server ended the session), is replaced; one idle for longer than
        `ASYNC_PING_AFTER` is pinged first (on the event loop, through the adapter)."""
        dialect = engine.dialect

        @event.listens_for(engine, "checkin")
        def given_back(dbapi_connection: Any, record: Any) -> None:
            record.info[USED] = time.monotonic()

        @event.listens_for(engine, "checkout")
        def handed_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
            driver = dbapi_connection.driver_connection
            used = record.info.get(USED)
            try:
                if driver.closed or driver.broken:
                    raise DisconnectionError("closed")
                readable, _, _ = select.select([driver.fileno()], [], [], 0)
                if readable:
                    raise DisconnectionError("the server ended the session")
                idle = None if used is None else time.monotonic() - used
                if idle is not None and idle > ASYNC_PING_AFTER:
                    dialect.do_ping(dbapi_connection)  # raises when there is no answer
            except DisconnectionError:
                raise
            except Exception as exc:
                raise DisconnectionError(str(exc)) from exc

    def read_only_url(self, url: URL) -> URL:
        read_only = "-c default_transaction_read_only=on"
        return url.update_query_dict({"options": f"{_options(url)} {read_only}".strip()})

    def snapshot_sql(self) -> str | None:
        return "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"

    def install(
        self, engine: Engine, *, synchronous: str | None, busy_timeout: float | None = None
    ) -> None:
        """Nothing per connection: psycopg begins a transaction on the first statement."""

    def now(self) -> str:
        return STAMP.format(t=CLOCK)

    def seconds_since(self, column: str) -> str:
        return f"EXTRACT(EPOCH FROM ({CLOCK} - CAST({column} AS timestamptz)))::float8"

    def finish_clock(self) -> str:
        return (
            f"SELECT {STAMP.format(t='c.t')}, "
            "EXTRACT(EPOCH FROM (c.t - CAST(r.started_at AS timestamptz)))::float8 * 1000.0 "
            f"FROM runs r, (SELECT {CLOCK} AS t) c WHERE r.id = :run_id"
        )

    def replace(self, table: Table) -> Insert:
        stmt = pg_insert(table)
        keys = [c.name for c in table.primary_key.columns]
        return stmt.on_conflict_do_update(
            index_elements=keys,
            set_={c.name: stmt.excluded[c.name] for c in table.columns if c.name not in keys},
        )

    def checkpoint_writes(self, insert_step: Insert, insert_event: Insert) -> list[ClauseElement]:
        """Both rows in one statement (the step INSERT as a data-modifying CTE): atomic on its
        own, so a checkpoint is one round trip in autocommit instead of BEGIN, two INSERTs and
        COMMIT."""
        return [insert_event.add_cte(insert_step.cte("step_row"))]

    def bulk_checkpoint_sql(self, insert_step: Insert, insert_event: Insert) -> str | None:
        """The batch as one array per column, unnested server-side `WITH ORDINALITY` so ids
        follow the batch order: one statement and one round trip for thousands of steps,
        where `executemany` sends a statement per row. The arrays travel in binary (`%b`):
        the text format would quote-scan every element on the client."""
        steps, events = cast(Table, insert_step.table), cast(Table, insert_event.table)
        columns = [name for name in insert_step.compile().params if name != "run_id"]
        arrays = ", ".join(f"%({c})b::{steps.c[c].type.compile()}[]" for c in columns)
        names = ", ".join(columns)
        return (
            f"WITH batch AS (SELECT * FROM unnest({arrays}) WITH ORDINALITY "
            f"AS b({names}, n)), "
            f"step_rows AS (INSERT INTO {steps.name} (run_id, {names}) "
            f"SELECT %(run_id)s::BIGINT, {names} FROM batch ORDER BY n) "
            f"INSERT INTO {events.name} (run_id, step, kind, detail) "
            "SELECT %(run_id)s::BIGINT, step, 'checkpoint', NULL FROM batch ORDER BY n"
        )

    def checkpoint_format(self, conn: Connection) -> int:
        if not inspect(conn).has_table(FORMAT_TABLE):
            return 0
        value = conn.execute(text(f"SELECT user_version FROM {FORMAT_TABLE}")).scalar()
        return int(value or 0)

    def checkpoint_format_column(self) -> tuple[str, str | None]:
        return f"(SELECT user_version FROM {FORMAT_TABLE} LIMIT 1)", FORMAT_TABLE

    def checkpoint_format_sql(self, version: int) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {FORMAT_TABLE} (user_version INTEGER NOT NULL)",
            f"DELETE FROM {FORMAT_TABLE}",
            f"INSERT INTO {FORMAT_TABLE} (user_version) VALUES ({int(version)})",
        ]

    def drop_checkpoint_format_sql(self) -> list[str]:
        return [f"DROP TABLE IF EXISTS {FORMAT_TABLE}"]

    def after_copy(self, conn: Connection, tables: Sequence[Table]) -> None:
        for table in tables:
            key = list(table.primary_key.columns)
            if len(key) != 1 or not key[0].autoincrement or key[0].name != "id":
                continue
            conn.execute(
                text(
                    f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                    f"COALESCE((SELECT MAX(id) FROM {table.name}), 0) + 1, false)"
                )
            )

    def check_memory_key(self, workspace: str, key: str) -> None:
        size = len(workspace.encode()) + len(key.encode())
        if size > MEMORY_KEY_BYTES:
            raise InvalidValueError(
                f"memory workspace and key take {size} bytes; PostgreSQL's unique index on "
                f"memory(workspace, key) holds at most {MEMORY_KEY_BYTES} (SQLite has no limit)"
            )

    def translate_error(
        self, exc: BaseException, *, connection_intact: bool = False
    ) -> StoreError | None:
        """From psycopg's SQLSTATE (and the violated constraint's name), its error type and
        the connection's state, never its message. An `OperationalError` without SQLSTATE is
        no answer of the server's (`UnansweredError`: lost, or never made when no server
        process ever served it), unless the connection is still intact (`connection_intact`),
        when libpq refused to send the statement (more than 65,535 parameters)."""
        exc = getattr(exc, "orig", None) or exc  # a SQLAlchemy error: its driver error
        if not type(exc).__module__.startswith("psycopg"):
            return None
        code = sqlstate_of(exc)
        message = str(exc)
        if code in LOCKED_STATES:
            return StoreLockedError(f"the store stayed locked by another writer: {message}")
        if code == READ_ONLY_STATE:
            return StoreAccessError(f"the store was opened read-only: {message}")
        if code == ORIGIN_OF_ANOTHER_ROLE:  # the roles' guard trigger
            said = getattr(getattr(exc, "diag", None), "message_primary", None)
            return OriginOfAnotherRoleError(said or message)
        if code == PRIVILEGE_STATE:
            return PrivilegeError(f"the centre's rules refused it: {message}")
        if code is not None and (code[:2] in LOGIN_CLASSES or code == NO_DATABASE_STATE):
            return StoreAccessError(f"the server refused the role or database: {message}")
        if code == OUT_OF_RANGE_STATE:
            return IntegerOverflowError(f"integer overflow: {message}")
        if code == DISK_FULL_STATE:
            return DiskFullError(
                f"the disk is full ({message.splitlines()[0]}); the write was rolled back"
            )
        if code == FOREIGN_KEY_STATE:
            constraint = getattr(getattr(exc, "diag", None), "constraint_name", None)
            if constraint == STEPS_RUN_FKEY:
                return RunNotFoundError(
                    "a step names a run that is not in the store (steps.run_id REFERENCES "
                    f"runs(id), as upstream): {message}"
                )
        unanswered = code is None and type(exc).__name__ == "OperationalError"
        if unanswered and connection_intact:
            return StatementRefusedError(
                f"the driver refused the statement before sending it; nothing changed: {message}"
            )
        if unanswered and getattr(getattr(exc, "pgconn", None), "backend_pid", None) == 0:
            # no server process ever served it: a connection refused at its start (an
            # unknown role, a failed login), said with the server's own reason
            return UnansweredError(f"could not connect to the server: {message}", connecting=True)
        if unanswered:
            return UnansweredError(f"the connection to the server was lost: {message}")
        if code is not None and (code[:2] in LOST_CLASSES or code in LOST_STATES):
            return StoreConnectionError(f"the connection to the server was lost: {message}")
        return None

    def lock_for_upgrade(self, conn: Connection) -> None:
        """Wait for any other upgrader of this database, until this transaction ends."""
        conn.execute(text(f"SELECT pg_advisory_xact_lock({UPGRADE_LOCK[0]}, {UPGRADE_LOCK[1]})"))

    def lock_memory_workspace(self, conn: Connection, workspace: str) -> None:
        """A transaction-scoped advisory lock on the workspace's name: under READ COMMITTED two
        concurrent puts would each see only their own new row, and both keep a 65th entry."""
        conn.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:name, 0))"),
            {"name": MEMORY_LOCK_PREFIX + workspace},
        )

    def connection_alive(self, dbapi_connection: Any, idle: float) -> bool:
        """Whether a kept connection can take the next statement without the risk of it
        being lost with the session.

        A session the server ended (restart, `pg_terminate_backend`, an idle reaper) has sent
        its last message and closed its socket: an idle connection whose socket is readable is
        dead — one `select`, no round trip. But a backend told to end a moment ago may not
        have run yet, and a statement sent to it then fails with the session, where the
        caller can only be told that it may have committed. So a connection that sat idle
        longer than `PING_AFTER` (or whose last call failed) is also pinged (a round trip,
        which the dying backend never answers); one used again within it — a writer in a
        loop — is not: the chance that its session was ended in that sliver is small, and if
        it was, the call fails with a typed `StoreConnectionError`, never silently.
        """
        if dbapi_connection.closed or dbapi_connection.broken:
            return False
        try:
            readable, _, _ = select.select([dbapi_connection.fileno()], [], [], 0)
            if readable:
                return False
            if idle > PING_AFTER:
                # an empty query: one round trip, no statement to parse or plan
                pgconn = dbapi_connection.pgconn
                result = pgconn.exec_(b"")
                return bool(result.status == EMPTY_QUERY and pgconn.status == CONNECTION_OK)
        except Exception:
            return False
        return True

    def connection_idle(self, dbapi_connection: Any) -> bool:
        if dbapi_connection.closed or dbapi_connection.broken:
            return False
        return getattr(dbapi_connection.info.transaction_status, "name", None) == "IDLE"

    def connection_intact(self, dbapi_connection: Any) -> bool:
        """psycopg's own view (an asyncio adapter's too): neither closed nor broken."""
        return not (dbapi_connection.closed or dbapi_connection.broken)

    def transaction_aborted(self, dbapi_connection: Any) -> bool:
        """psycopg's view of the connection: a transaction in error can only roll back."""
        info = getattr(dbapi_connection, "info", None)
        status = getattr(info, "transaction_status", None)
        return getattr(status, "name", None) == "INERROR"

    def database_bytes(self, conn: Connection) -> int:
        return int(
            conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar() or 0
        )

    def footprint(self, conn: Connection) -> tuple[int, int, list[tuple[str, int]]]:
        """The database's size on disk; free bytes are what `VACUUM` would make reusable, the
        dead tuples' share of each table (an estimate from the statistics); sizes of the
        schema's tables and indexes."""
        total = int(
            conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar() or 0
        )
        free = conn.exec_driver_sql(
            "SELECT COALESCE(SUM(pg_relation_size(relid) * n_dead_tup "
            "/ GREATEST(n_live_tup + n_dead_tup, 1)), 0) FROM pg_stat_user_tables"
        ).scalar()
        rows = conn.exec_driver_sql(
            "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i')"
        ).all()
        return total, int(free or 0), [(str(n), int(b)) for n, b in rows]

    def vacuum(self, dbapi_connection: Any) -> None:
        """`VACUUM` refuses a transaction block: run it in autocommit, then restore."""
        dbapi_connection.autocommit = True
        try:
            dbapi_connection.execute("VACUUM")
        finally:
            dbapi_connection.autocommit = False

    def spend_triggers_sql(self) -> list[str]:
        def bump(rows: str) -> str:
            day, model = SPEND_DAY.format(row=rows), SPEND_MODEL.format(row=rows)
            return (
                f"INSERT INTO hs_spend_days (day, model, changes) SELECT {day}, {model}, "
                f"count(*) FROM {rows} GROUP BY 1, 2 ORDER BY 1, 2 ON CONFLICT (day, model) "
                "DO UPDATE SET changes = hs_spend_days.changes + excluded.changes; "
                f"INSERT INTO hs_spend_runs (run_id, changes) SELECT {rows}.run_id, count(*) "
                f"FROM {rows} GROUP BY 1 ORDER BY 1 ON CONFLICT (run_id) "
                "DO UPDATE SET changes = hs_spend_runs.changes + excluded.changes;"
            )

        def bump_row(row: str) -> str:
            day, model = SPEND_DAY.format(row=row), SPEND_MODEL.format(row=row)
            return (
                f"INSERT INTO hs_spend_days (day, model, changes) VALUES ({day}, {model}, 1) "
                "ON CONFLICT (day, model) "
                "DO UPDATE SET changes = hs_spend_days.changes + excluded.changes; "
                f"INSERT INTO hs_spend_runs (run_id, changes) VALUES ({row}.run_id, 1) "
                "ON CONFLICT (run_id) "
                "DO UPDATE SET changes = hs_spend_runs.changes + excluded.changes;"
            )

        def function(name: str, body: str) -> str:
            # `SET search_path FROM CURRENT`: the counters are found where the function was
            # created (a store's schema of its own too), whatever the search_path of the
            # session whose statement fires the trigger.
            return (
                f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
                f"SET search_path FROM CURRENT AS $$ BEGIN {body} RETURN NULL; END $$"
            )

        # Statement-level with transition tables for inserts and deletes (a COPY or a
        # retention sweep bumps each group once per statement, in key order); per row for
        # updates, which PostgreSQL cannot give both a column list and transition tables.
        return [
            function("hs_spend_inserted", bump("hs_new")),
            function("hs_spend_deleted", bump("hs_old")),
            function("hs_spend_updated", f"{bump_row('OLD')} {bump_row('NEW')}"),
            "CREATE TRIGGER hs_spend_insert AFTER INSERT ON provider_calls "
            "REFERENCING NEW TABLE AS hs_new FOR EACH STATEMENT "
            "EXECUTE FUNCTION hs_spend_inserted()",
            "CREATE TRIGGER hs_spend_delete AFTER DELETE ON provider_calls "
            "REFERENCING OLD TABLE AS hs_old FOR EACH STATEMENT "
            "EXECUTE FUNCTION hs_spend_deleted()",
            f"CREATE TRIGGER hs_spend_update AFTER UPDATE OF {', '.join(SPEND_WATCHED)} "
            "ON provider_calls FOR EACH ROW EXECUTE FUNCTION hs_spend_updated()",
        ]

    def run_tokens_triggers_sql(self) -> list[str]:
        big = I64_MAX

        def function(name: str, body: str) -> str:
            return (
                f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
                f"SET search_path FROM CURRENT AS $$ BEGIN {body} RETURN NULL; END $$"
            )

        def put(rows: str) -> str:
            # a run's new steps summed (NUMERIC: no overflow), NULL once unknown
            return (
                "INSERT INTO hs_run_tokens (run_id, total) SELECT run_id, "
                f"CASE WHEN bool_or(tokens < 0) OR coalesce(sum(tokens), 0) > {big} THEN NULL "
                f"ELSE coalesce(sum(tokens), 0)::BIGINT END FROM {rows} GROUP BY run_id "
                "ORDER BY run_id ON CONFLICT (run_id) DO UPDATE SET total = CASE "
                "WHEN hs_run_tokens.total IS NULL OR excluded.total IS NULL "
                f"OR hs_run_tokens.total > {big} - excluded.total THEN NULL "
                "ELSE hs_run_tokens.total + excluded.total END;"
            )

        def take(rows: str) -> str:
            return (
                "UPDATE hs_run_tokens AS t SET total = CASE WHEN t.total IS NULL "
                "OR d.negative IS TRUE THEN NULL ELSE t.total - d.tokens END "
                "FROM (SELECT run_id, coalesce(sum(tokens), 0) AS tokens, "
                f"bool_or(tokens < 0) AS negative FROM {rows} GROUP BY run_id) AS d "
                "WHERE t.run_id = d.run_id;"
            )

        one = "(SELECT OLD.run_id, OLD.tokens) AS o(run_id, tokens)"
        new = "(SELECT NEW.run_id, NEW.tokens) AS n(run_id, tokens)"
        # statement-level with transition tables for inserts and deletes (a COPY or a prune
        # touches each run once a statement), per row for updates (see spend_triggers_sql)
        return [
            function("hs_run_tokens_inserted", put("hs_new")),
            function("hs_run_tokens_deleted", take("hs_old")),
            function("hs_run_tokens_updated", f"{take(one)} {put(new)}"),
            # every run has its row from the start: the door locks it (`FOR UPDATE`), so two
            # writers of one run are checked one after the other
            function(
                "hs_run_tokens_run_inserted",
                "INSERT INTO hs_run_tokens (run_id, total) SELECT id, 0 FROM hs_new "
                "ORDER BY id ON CONFLICT (run_id) DO NOTHING;",
            ),
            function(
                "hs_run_tokens_run_deleted",
                "DELETE FROM hs_run_tokens WHERE run_id IN (SELECT id FROM hs_old);",
            ),
            "CREATE TRIGGER hs_run_tokens_run_insert AFTER INSERT ON runs "
            "REFERENCING NEW TABLE AS hs_new FOR EACH STATEMENT "
            "EXECUTE FUNCTION hs_run_tokens_run_inserted()",
            "CREATE TRIGGER hs_run_tokens_run_delete AFTER DELETE ON runs "
            "REFERENCING OLD TABLE AS hs_old FOR EACH STATEMENT "
            "EXECUTE FUNCTION hs_run_tokens_run_deleted()",
            "CREATE TRIGGER hs_run_tokens_insert AFTER INSERT ON steps "
            "REFERENCING NEW TABLE AS hs_new FOR EACH STATEMENT "
            "EXECUTE FUNCTION hs_run_tokens_inserted()",
            "CREATE TRIGGER hs_run_tokens_delete AFTER DELETE ON steps "
            "REFERENCING OLD TABLE AS hs_old FOR EACH STATEMENT "
            "EXECUTE FUNCTION hs_run_tokens_deleted()",
            "CREATE TRIGGER hs_run_tokens_update AFTER UPDATE OF run_id, tokens "
            "ON steps FOR EACH ROW EXECUTE FUNCTION hs_run_tokens_updated()",
        ]

    def drop_run_tokens_triggers_sql(self) -> list[str]:
        return [
            *(f"DROP TRIGGER IF EXISTS hs_run_tokens_{op} ON steps"
              for op in ("insert", "delete", "update")),
            *(f"DROP TRIGGER IF EXISTS hs_run_tokens_{op} ON runs"
              for op in ("run_insert", "run_delete")),
            *(f"DROP FUNCTION IF EXISTS hs_run_tokens_{fn}()"
              for fn in ("inserted", "deleted", "updated", "run_inserted", "run_deleted")),
        ]  # fmt: skip

    def run_tokens_backfill_sql(self) -> str:
        return (
            "INSERT INTO hs_run_tokens (run_id, total) SELECT run_id, "
            f"CASE WHEN bool_or(tokens < 0) OR coalesce(sum(tokens), 0) > {I64_MAX} THEN NULL "
            "ELSE coalesce(sum(tokens), 0)::BIGINT END FROM steps GROUP BY run_id "
            "UNION ALL SELECT id, 0 FROM runs AS r "
            "WHERE NOT EXISTS (SELECT 1 FROM steps AS s WHERE s.run_id = r.id)"
        )

    def drop_spend_triggers_sql(self) -> list[str]:
        return [
            *(f"DROP TRIGGER IF EXISTS hs_spend_{op} ON provider_calls"
              for op in ("insert", "delete", "update")),
            *(f"DROP FUNCTION IF EXISTS hs_spend_{fn}()"
              for fn in ("inserted", "deleted", "updated")),
        ]  # fmt: skip

    def typed_times_sql(self, shape: Mapping[str, Collection[str]]) -> list[str]:
        from .postgresql_times import create_sql  # the models, only when a revision asks

        return create_sql(shape)

    def typed_times_view_sql(self, table: str, columns: Collection[str]) -> list[str]:
        from .postgresql_times import view_sql

        return view_sql(table, columns)

    def drop_typed_times_sql(self) -> list[str]:
        from .postgresql_times import drop_sql

        return drop_sql()

    def typed_times_views(self) -> frozenset[str]:
        from .postgresql_times import VIEWS

        return VIEWS

    def bulk_insert(
        self, conn: Connection, table: Table, columns: Sequence[str], rows: Iterable[Sequence[Any]]
    ) -> None:
        """One `COPY … FROM STDIN` on the connection's own driver connection, so inside its
        transaction, streamed as the rows come: several times the rows per second of
        `executemany`."""
        driver = conn.connection.driver_connection
        assert driver is not None
        names = ", ".join(f'"{c}"' for c in columns)
        with driver.cursor() as cursor:
            guarded = cursor.execute(
                "SELECT row_security_active(%s::regclass)", (f'"{table.name}"',)
            ).fetchone()
            into = f'"{table.name}"'
            if guarded is not None and guarded[0]:
                # COPY FROM refuses a table under row-level security (a follower role's): a
                # few rows are inserted as they are (one pipelined batch), more go through a
                # temporary table of the connection's and one INSERT … SELECT; the table's
                # policies check both
                rows = iter(rows)
                first = list(itertools.islice(rows, FEW_ROWS))
                if len(first) < FEW_ROWS:
                    marks = ", ".join(["%s"] * len(columns))
                    if first:
                        cursor.executemany(f"INSERT INTO {into} ({names}) VALUES ({marks})", first)
                    return
                rows = itertools.chain(first, rows)
                into = _bulk_table(cursor, table.name, names)
            with cursor.copy(f"COPY {into} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            if into != f'"{table.name}"':
                cursor.execute(f'INSERT INTO "{table.name}" ({names}) SELECT {names} FROM {into}')
                cursor.execute(f"DELETE FROM {into}")

    def insert_returning_ids(
        self, conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]]
    ) -> list[int]:
        """The ids taken from the table's sequence first, all in one statement, then the rows
        written with them by `bulk_insert` (one COPY): two round trips for any number of
        rows, and no RETURNING to match back."""
        if not rows:
            return []
        ids = [
            int(i) for i in conn.exec_driver_sql(NEW_IDS, (f'"{table.name}"', len(rows))).scalars()
        ]
        columns = list(rows[0])
        self.bulk_insert(
            conn,
            table,
            ["id", *columns],
            ((i, *(row[c] for c in columns)) for i, row in zip(ids, rows, strict=True)),
        )
        return ids

    def update_rows(
        self,
        conn: Connection,
        table: Table,
        keys: Sequence[str],
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> None:
        """One UPDATE for all of `rows`, joined to them as arrays (`unnest`): one statement
        whatever their number, not one per row. Of rows with the same keys the last is
        written, as by statements run in turn."""
        if not rows:
            return
        rows = list({tuple(row[: len(keys)]): row for row in rows}.values())
        given, found = _unnested(conn, table, [*keys, *columns], len(keys))
        sets = ", ".join(f'"{c}" = u.v{at}' for at, c in enumerate(columns))
        conn.exec_driver_sql(
            f'UPDATE "{table.name}" AS t SET {sets} FROM {given} WHERE {found}',
            tuple(list(values) for values in zip(*rows, strict=True)),
        )

    def delete_rows(
        self, conn: Connection, table: Table, keys: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> None:
        """One DELETE for all of `rows`, joined to them as arrays (`unnest`)."""
        if not rows:
            return
        given, found = _unnested(conn, table, keys, len(keys))
        conn.exec_driver_sql(
            f'DELETE FROM "{table.name}" AS t USING {given} WHERE {found}',
            tuple(list(values) for values in zip(*rows, strict=True)),
        )

    def trigger_names(self, conn: Connection, table: str) -> frozenset[str]:
        """User triggers on `table` in the current schema (not the internal ones behind
        constraints)."""
        rows = conn.exec_driver_sql(
            "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE c.relname = %(table)s AND c.relnamespace = current_schema()::regnamespace "
            "AND NOT t.tgisinternal",
            {"table": table},
        ).scalars()
        return frozenset(str(name) for name in rows)


def _bulk_table(cursor: Any, table: str, names: str) -> str:
    """The connection's temporary table for bulk rows of `table`'s columns `names`, made the
    first time (it lives as long as the connection, empty between batches; asked for each
    time, as a transaction that made it may have been rolled back)."""
    name = "hs_bulk_" + hashlib.blake2b(f"{table}:{names}".encode(), digest_size=6).hexdigest()
    cursor.execute(
        f'CREATE TEMPORARY TABLE IF NOT EXISTS {name} AS SELECT {names} FROM "{table}" WITH NO DATA'
    )
    return f"pg_temp.{name}"


def _unnested(conn: Connection, table: Table, columns: Sequence[str], keys: int) -> tuple[str, str]:
    """The rows given as one array parameter per column of `columns` (each of the column's
    own type), unnested as `u` (`k0…` for the first `keys` columns, `v0…` for the rest), and
    the condition joining the table as `t` to them on those keys."""
    names = [f"k{at}" if at < keys else f"v{at - keys}" for at in range(len(columns))]
    arrays = ", ".join(f"%s::{table.c[c].type.compile(dialect=conn.dialect)}[]" for c in columns)
    found = " AND ".join(f't."{c}" = u.{n}' for c, n in zip(columns[:keys], names, strict=False))
    return f"unnest({arrays}) AS u({', '.join(names)})", found
