"""PostgreSQL: the shared backend for many hosts, in the same row formats as SQLite.

Time stamps are rendered by the server clock into upstream's exact text format; `user_version`
has no equivalent, so the checkpoint-format marker is a one-row table written by the 0.7
migration; upserts use `ON CONFLICT`; ids copied in explicitly are followed by `setval`.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Connection, Engine, Table, inspect, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import URL
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.dml import Insert

from ..errors import (
    DiskFullError,
    DuplicateObjectError,
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
from ..sqldefaults import NOW, STAMP_OF
from .base import FORMAT_TABLE, Backend
from .postgresql_codes import (
    DISK_FULL_STATE,
    DUPLICATE_OBJECT_STATE,
    FOREIGN_KEY_STATE,
    LOCKED_STATES,
    LOGIN_CLASSES,
    LOST_CLASSES,
    LOST_STATES,
    NO_DATABASE_STATE,
    OUT_OF_RANGE_STATE,
    PRIVILEGE_STATE,
    READ_ONLY_STATE,
    STEPS_RUN_FKEY,
    sqlstate_of,
)
from .postgresql_connections import (
    ASYNC_PING_AFTER,
    check_on_checkout,
    connection_alive,
    connection_idle,
    connection_intact,
    transaction_aborted,
)
from .postgresql_roles import ORIGIN_OF_ANOTHER_ROLE, ROLE_TRIGGERS, keep_rules, unprotected
from .postgresql_run_tokens import (
    altered_triggers,
    call_tokens_backfill_sql,
    call_tokens_triggers_sql,
    drop_call_tokens_triggers_sql,
    drop_run_tokens_triggers_sql,
    run_tokens_backfill_sql,
    run_tokens_triggers_sql,
)
from .postgresql_schemas import (
    create_own_schema,
    database_exists,
    own_schema_of,
    own_schema_script,
    search_path,
    url_options,
    with_own_schema,
    work_in_own_schema,
)
from .postgresql_spend import drop_spend_triggers_sql, spend_triggers_sql

UPGRADE_LOCK = (0x68735F75, 1)
"""The transaction-scoped advisory lock (two-key form) that serialises upgrades of one
database ('hs_u'; the two-key space never meets single-key locks)."""

MEMORY_KEY_BYTES = 2600
"""What a btree entry of memory's UNIQUE(workspace, key) can hold (PostgreSQL's limit is
about a third of an 8 KB page, after compression; this stays under it for any text)."""

FEW_ROWS = 500
"""Bulk rows into a table under row-level security up to which a plain INSERT batch costs less
than a temporary table and INSERT … SELECT."""
NEW_IDS = (
    "SELECT nextval(q.s) FROM (SELECT pg_get_serial_sequence(%s, 'id')::regclass AS s) AS q, "
    "generate_series(1, %s)"
)
"""Ids for as many new rows of a table (its name, the count), from its `id` column's sequence,
taken in one statement before the rows are written."""

MEMORY_LOCK_PREFIX = "harness_store.memory:"
"""Advisory-lock key space of memory workspaces (hashed with the workspace name)."""

CLOCK = NOW["postgresql"]
STAMP = STAMP_OF["postgresql"]


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
        return create_own_schema(conn, schema, self.translate_error)

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

    def unguarded_tables(self, conn: Connection) -> list[str]:
        return unprotected(conn)

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
        """Check each connection the asyncio pool hands out (`check_on_checkout`), as the kept
        connections of a sync Store are checked (`connection_alive`)."""
        check_on_checkout(engine)

    def read_only_url(self, url: URL) -> URL:
        read_only = "-c default_transaction_read_only=on"
        return url.update_query_dict({"options": f"{url_options(url)} {read_only}".strip()})

    def snapshot_sql(self) -> str | None:
        return "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"

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
        if code == DUPLICATE_OBJECT_STATE:
            return DuplicateObjectError(f"it exists already: {message}")
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
        return connection_alive(dbapi_connection, idle)

    def connection_idle(self, dbapi_connection: Any) -> bool:
        return connection_idle(dbapi_connection)

    def connection_intact(self, dbapi_connection: Any) -> bool:
        return connection_intact(dbapi_connection)

    def transaction_aborted(self, dbapi_connection: Any) -> bool:
        return transaction_aborted(dbapi_connection)

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
        return spend_triggers_sql()

    def run_tokens_triggers_sql(self) -> list[str]:
        return run_tokens_triggers_sql()

    def drop_run_tokens_triggers_sql(self) -> list[str]:
        return drop_run_tokens_triggers_sql()

    def run_tokens_backfill_sql(self) -> str:
        return run_tokens_backfill_sql()

    def call_tokens_triggers_sql(self) -> list[str]:
        return call_tokens_triggers_sql()

    def drop_call_tokens_triggers_sql(self) -> list[str]:
        return drop_call_tokens_triggers_sql()

    def call_tokens_backfill_sql(self) -> str:
        return call_tokens_backfill_sql()

    def drop_spend_triggers_sql(self) -> list[str]:
        return drop_spend_triggers_sql()

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

    def new_ids(self, conn: Connection, table: Table, count: int) -> list[int]:
        """The ids taken from the table's sequence, all in one statement: one round trip
        for any number of rows."""
        if count <= 0:
            return []
        taken = conn.exec_driver_sql(NEW_IDS, (f'"{table.name}"', count)).scalars().all()
        return [int(i) for i in taken]  # fetched whole: one call, not one a row

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

    def altered_triggers(self, conn: Connection, statements: Iterable[str]) -> frozenset[str]:
        return altered_triggers(conn, statements)


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
