"""What every backend provides; the Store and the migrations speak only to this interface.

Each backend module (`sqlite`, `postgresql`) holds everything that differs between databases:
how a write transaction begins, the clock expression and its text format, upserts, the
checkpoint-format marker, journal mode, id sequences after a copy, and error translation. The
Store and the migrations never test a dialect name themselves.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, ClassVar

from sqlalchemy import Connection, Engine, Table, bindparam, inspect
from sqlalchemy.engine import URL, Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.dml import Insert

from ..errors import StoreError
from ..records.accounting import USAGE_SUMS
from .registry import register
from .statement_binder import StatementBinder, binder_for
from .write_queue import WriteQueue

SPEND_WATCHED = ("run_id", "model", "at", *USAGE_SUMS)
"""The `provider_calls` columns a spend group or its cost depends on: an update of any of them
bumps the group's counters (0.58's archive empties `failure`, which does not)."""

SPEND_DAY = "substr({row}.at, 1, 10)"
SPEND_MODEL = "coalesce({row}.model, '(unknown model)')"
"""A call's spend keys in trigger SQL (`row`: NEW, OLD or a transition table), as the Store
groups: the day is `at`'s first ten characters, a call with no model is upstream's
"(unknown model)"."""

WRITE_TRANSACTION = "hs_write"
"""`Connection.info` key or execution option, set by the connector alone: when true, the next
`begin` takes the write lock up front (`BEGIN IMMEDIATE` on SQLite; the writers' turn is the
connector's). `Store.write_engine` sets the option for ORM sessions."""

KEEP_ORPHANS = "hs_keep_orphans"
"""`Connection.info` key, set by the connector for a bulk load: when true, the next `begin`
turns foreign keys off first (SQLite), so a copy carries a source's orphan steps (written by a
tool that left foreign keys off) unchanged."""

WRITE_DEADLINE = "hs_write_deadline"
"""`Connection.info` key: the `time.monotonic()` by which the next write transaction must have
begun (set from the queue's turn, so that one busy timeout bounds the queue and the lock)."""

FORMAT_TABLE = "harness_user_version"
"""The table a backend without a header field for the checkpoint-format marker keeps it in
(PostgreSQL's stand-in for `PRAGMA user_version`: one row, one INTEGER), which a copy and a
check leave out of the store's own tables whatever the backend."""

BULK_BATCH = 5000
"""Rows per `executemany` of the default `Backend.bulk_insert`."""


class Backend(ABC):
    """One database family's way of keeping upstream's formats and guarantees."""

    name: ClassVar[str]
    one_connection: ClassVar[bool] = False
    """Whether a Store keeps one connection for its life (threads take turns on it) rather
    than borrowing from a pool per operation."""
    held_connections: ClassVar[int] = 0
    """How many driver connections a Store keeps checked out for its hot paths (checkpoints,
    tree aggregates) instead of borrowing a pooled one per call; 0 for none. An `AsyncStore`'s
    tasks on the event loop share them as a sync Store's threads do."""
    native_async: ClassVar[bool] = False
    """Whether the driver speaks asyncio natively, so an `AsyncStore` runs its calls on the
    event loop (SQLAlchemy's asyncio engine) instead of on threads (SQLite's has none)."""
    loop_ping_after: ClassVar[float] = 0.0
    """Seconds a kept connection of an `AsyncStore` (on the event loop) may sit idle and be
    reused without a ping."""
    statement_parameters: ClassVar[int | None] = None
    """The most parameters the driver sends in one statement (None: no limit the package
    meets)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass that names its backend is registered under that name (`registry`)."""
        super().__init_subclass__(**kwargs)
        if "name" in vars(cls):
            register(cls)

    @abstractmethod
    def engine_options(
        self, url: URL, *, synchronous: str | None, busy_timeout: float | None = None
    ) -> dict[str, Any]:
        """Keyword arguments for `create_engine` (pool, connect args) suited to this backend."""

    def async_engine_options(
        self, url: URL, *, synchronous: str | None, busy_timeout: float | None = None
    ) -> dict[str, Any]:
        """Keyword arguments for `create_async_engine` (a backend with `native_async`)."""
        return self.engine_options(url, synchronous=synchronous, busy_timeout=busy_timeout)

    def install_async(
        self, engine: Engine, *, synchronous: str | None, busy_timeout: float | None = None
    ) -> None:
        """Attach the per-connection setup to an asyncio engine's `sync_engine`."""
        self.install(engine, synchronous=synchronous, busy_timeout=busy_timeout)

    @abstractmethod
    def read_only_url(self, url: URL) -> URL:
        """The same store, opened so that no statement can write to it."""

    def install(  # noqa: B027 - nothing per connection by default
        self, engine: Engine, *, synchronous: str | None, busy_timeout: float | None = None
    ) -> None:
        """Attach the per-connection setup (pragmas, transaction control) to an engine.
        Nothing by default: a driver that begins a transaction on the first statement
        (psycopg) needs none."""

    @abstractmethod
    def now(self) -> str:
        """SQL for the database clock as upstream's `%Y-%m-%dT%H:%M:%fZ` text (UTC, ms)."""

    @abstractmethod
    def seconds_since(self, column: str) -> str:
        """SQL for the real seconds elapsed from a stamp column to the database clock (or NULL)."""

    @abstractmethod
    def finish_clock(self) -> str:
        """A SELECT of `(finished_at, duration_ms)` for run `:run_id`, from one clock reading."""

    @abstractmethod
    def replace(self, table: Table) -> Insert:
        """`INSERT OR REPLACE` on the primary key, as upstream writes its per-run rows."""

    @abstractmethod
    def checkpoint_format(self, conn: Connection) -> int:
        """The store's checkpoint-format marker (`user_version` on SQLite)."""

    @abstractmethod
    def checkpoint_format_column(self) -> tuple[str, str | None]:
        """The checkpoint-format marker as a scalar SQL expression a SELECT can hold (read with
        the statement's other columns, one round trip), and the table it reads if it needs
        one that a store may lack (None when every store has it)."""

    @abstractmethod
    def checkpoint_format_sql(self, version: int) -> list[str]:
        """The statements that write the checkpoint-format marker (also emitted by `--sql`)."""

    def set_checkpoint_format(self, conn: Connection, version: int) -> None:
        """Write the checkpoint-format marker."""
        for statement in self.checkpoint_format_sql(version):
            conn.exec_driver_sql(statement)

    def raise_checkpoint_format(self, conn: Connection, version: int) -> None:
        """Stamp the marker to `version` when lower, never lowering a newer one (0.7's rule)."""
        if self.checkpoint_format(conn) < version:
            self.set_checkpoint_format(conn, version)

    def drop_checkpoint_format_sql(self) -> list[str]:
        """The statements that put the marker back to a pre-0.7 store's (the 0.7 downgrade)."""
        return self.checkpoint_format_sql(0)

    def wal_sql(self) -> list[str]:
        """The statements that switch a file store to WAL (0.12), run outside a transaction."""
        return []

    def switch_to_wal(self, dbapi_connection: Any) -> None:  # noqa: B027 - nothing to switch
        """Run `wal_sql` on a driver connection with no transaction open."""

    def switch_connection_to_wal(self, conn: Connection) -> None:
        """`switch_to_wal` on the driver connection under `conn` (the migration runner's,
        which holds no Store and has no connector), outside any transaction."""
        driver = conn.connection.driver_connection
        assert driver is not None
        self.switch_to_wal(driver)

    def needs_wal_switch(self, conn: Connection) -> bool:
        """Whether `use_wal` would change anything (it must run outside a transaction)."""
        return False

    def after_copy(self, conn: Connection, tables: Sequence[Table]) -> None:  # noqa: B027
        """Bring id generators past the ids a copy inserted explicitly."""

    def check_memory_key(self, workspace: str, key: str) -> None:  # noqa: B027 - no limit
        """Refuse a memory (workspace, key) this backend's unique index cannot hold."""

    def translate_error(
        self, exc: BaseException, *, connection_intact: bool = False
    ) -> StoreError | None:
        """Map a driver error to a typed `StoreError`, or None to let it through unchanged.
        `connection_intact`: the connection the statement ran on was found open and whole
        after the error (the connector knows; a caller that does not leaves it False)."""
        return None

    def write_queue(self, url: URL, *, busy_timeout: float | None = None) -> WriteQueue:
        """The queue a Store's write transactions on this database join."""
        return WriteQueue()

    def lock_memory_workspace(self, conn: Connection, workspace: str) -> None:  # noqa: B027
        """Serialise memory writes to one workspace until the transaction ends, so each write
        sees the others' rows when it enforces the caps. Nothing to do where a write
        transaction already holds the whole database (SQLite's `BEGIN IMMEDIATE`)."""

    def connection_alive(self, dbapi_connection: Any, idle: float) -> bool:
        """Whether a kept driver connection, unused for `idle` seconds, can be reused."""
        return True

    def connection_idle(self, dbapi_connection: Any) -> bool:
        """Whether a kept driver connection is open and idle after a failed call (reusable)."""
        return True

    def connection_intact(self, dbapi_connection: Any) -> bool:
        """Whether a driver connection is still open and whole after a failed statement (its
        own state, no round trip): what tells a statement the driver refused from a lost
        connection where the driver's error says neither."""
        return True

    def binder(self, dialect: Dialect) -> StatementBinder:
        """The binder of the engine whose dialect is `dialect` (made on first use)."""
        return binder_for(dialect, self)

    def driver_rows(self, conn: Connection, statement: Any) -> Any:
        """Run a SELECT on `conn`'s own driver connection, inside the transaction `conn` has
        open, and return the driver's cursor: its rows come as plain tuples, without the
        per-row work of a SQLAlchemy result (sync's and copy's bulk reads of a source). The
        statement is bound as the connector's reads are (`binder`: compiled once, its
        parameters bound, never literals)."""
        sql, params = self.binder(conn.dialect).bound(statement)
        driver = conn.connection.driver_connection
        assert driver is not None
        return driver.execute(sql, params)

    def driver_text(self, conn: Connection, sql: str) -> Any:
        """Run a SELECT given as SQL text without parameters (compiled once by its caller) on
        `conn`'s own driver connection, as `driver_rows` does; the driver's cursor."""
        driver = conn.connection.driver_connection
        assert driver is not None
        return driver.execute(sql)

    def still_read_outdated(self, conn: Connection) -> bool:
        """Whether `conn` reads a file as unchanging (SQLite's `immutable=1`) that a writer
        has since opened, so that it must be replaced to see the writer's commits."""
        return False

    def decode_with(self, engine: Engine, text_factory: Callable[[bytes], str]) -> None:  # noqa: B027
        """Decode the text of every connection `engine` opens with `text_factory` (a backend
        whose driver hands over bytes that may not be UTF-8; nothing elsewhere)."""

    def shares_memory(self, engine: Engine) -> bool:
        """Whether the engine's database lives only in its one connection (in-memory)."""
        return False

    def transaction_aborted(self, dbapi_connection: Any) -> bool:
        """Whether the driver connection's open transaction can only roll back (the server
        aborted it), so that committing it would silently drop its writes."""
        return False

    def checkpoint_writes(self, insert_step: Insert, insert_event: Insert) -> list[ClauseElement]:
        """The statements that write one checkpoint (a step row and its `checkpoint` event),
        all taking the same named parameters. By default the two INSERTs, run in one
        transaction; a backend that can do both in one atomic statement returns that."""
        return [insert_step, insert_event]

    def bulk_checkpoint_sql(self, insert_step: Insert, insert_event: Insert) -> str | None:
        """One statement that checkpoints a whole batch of one run's steps from column arrays
        (parameters: `run_id`, and a list per other parameter of `insert_step`, in batch
        order), made of the checkpoint's own two INSERTs (their tables and columns), or None
        when `executemany` of `checkpoint_writes` is this backend's fastest way."""
        return None

    def foreign_keys_back(self, conn: Connection) -> None:  # noqa: B027 - none by default
        """Put foreign keys back on after a transaction that kept orphans (`KEEP_ORPHANS`),
        outside any transaction. Here nothing: only SQLite switches them off."""

    def begin_write_sql(self) -> str | None:
        """The statement that opens a write transaction on a raw driver connection, if any."""
        return None

    def snapshot_sql(self) -> str | None:
        """The first statement of a read transaction every statement of which must see one
        instant, when the backend's own transactions do not (PostgreSQL's READ COMMITTED
        sees each statement's own); None when a transaction already does (SQLite)."""
        return None

    def lock_for_upgrade(self, conn: Connection) -> None:  # noqa: B027 - nothing to lock
        """Serialise upgrades of one database: the first statement of the upgrade's
        transaction. SQLite's `BEGIN IMMEDIATE` already holds the write lock."""

    def footprint(self, conn: Connection) -> tuple[int, int, list[tuple[str, int]]]:
        """The store's bytes in use and free, and the bytes of each table and index (empty
        where the database cannot say) — `Store.store_size`."""
        return 0, 0, []

    def vacuum(self, dbapi_connection: Any) -> None:
        """Run `VACUUM` on a driver connection with no transaction open (it cannot run in
        one) — `Store.compact`."""
        dbapi_connection.execute("VACUUM")

    def vacuums_in_slices(self, dbapi_connection: Any) -> bool:
        """Whether the store gives its free space back a slice at a time (`vacuum_slice`),
        each its own short transaction; else `vacuum` does it in one. Never here."""
        return False

    def vacuum_slice(self, dbapi_connection: Any, pages: int) -> int:
        """Give back at most `pages` free pages in one transaction (its own, on a driver
        connection with none open); the free pages left. Only where `vacuums_in_slices`."""
        raise NotImplementedError

    def before_first_table(self, conn: Connection) -> None:
        """What a new store is set to before the transaction that builds it, in a read
        transaction of its own (SQLite: incremental auto-vacuum, which only a file not yet
        written can take without a rewrite). Nothing here."""
        return None

    @abstractmethod
    def spend_triggers_sql(self) -> list[str]:
        """The statements that make every insert, delete and usage update of `provider_calls`
        bump its group's counters in `hs_spend_days` and `hs_spend_runs` (revision hs3)."""

    @abstractmethod
    def drop_spend_triggers_sql(self) -> list[str]:
        """The statements that remove what `spend_triggers_sql` created."""

    @abstractmethod
    def run_tokens_triggers_sql(self) -> list[str]:
        """The statements that create hs6's triggers keeping `hs_run_tokens` (each run's
        total of `steps.tokens`, NULL once unknown) on every write of `steps`."""

    @abstractmethod
    def drop_run_tokens_triggers_sql(self) -> list[str]:
        """The statements that remove what `run_tokens_triggers_sql` created."""

    @abstractmethod
    def run_tokens_backfill_sql(self) -> str:
        """The statement that fills `hs_run_tokens` from the steps already stored."""

    @abstractmethod
    def call_tokens_triggers_sql(self) -> list[str]:
        """The statements that create hs7's triggers keeping `hs_run_call_tokens` (each run's
        total of `provider_calls.total_tokens`, NULL once unknown) on every write of
        `provider_calls`, and the row's removal with its run."""

    @abstractmethod
    def drop_call_tokens_triggers_sql(self) -> list[str]:
        """The statements that remove what `call_tokens_triggers_sql` created."""

    @abstractmethod
    def call_tokens_backfill_sql(self) -> str:
        """The statement that fills `hs_run_call_tokens` from the calls already stored."""

    def typed_times_sql(self, shape: Mapping[str, Collection[str]]) -> list[str]:
        """The statements of revision hs5: analysts' typed views of the tables of `shape`
        (table → its columns) that hold stamps. None here: upstream opens SQLite stores,
        which keep the shape it gives them (`PostgreSQLBackend` has them)."""
        return []

    def typed_times_view_sql(self, table: str, columns: Collection[str]) -> list[str]:
        """The statements that make `table`'s typed view again over `columns` (a later
        revision that changes the table); none here."""
        return []

    def drop_typed_times_sql(self) -> list[str]:
        """The statements that remove what `typed_times_sql` created; none here."""
        return []

    def typed_times_views(self) -> frozenset[str]:
        """The names of the views `typed_times_sql` creates; none here."""
        return frozenset()

    def bulk_insert(
        self, conn: Connection, table: Table, columns: Sequence[str], rows: Iterable[Sequence[Any]]
    ) -> None:
        """Insert many rows (sequences in `columns` order, read as they come) in the
        connection's transaction, the backend's fastest way; ids are left to the database
        (sync's append tables)."""
        statement = table.insert()
        batch: list[dict[str, Any]] = []
        for row in rows:
            batch.append(dict(zip(columns, row, strict=True)))
            if len(batch) == BULK_BATCH:
                conn.execute(statement, batch)
                batch = []
        if batch:
            conn.execute(statement, batch)

    def new_ids(self, conn: Connection, table: Table, count: int) -> list[int]:
        """Ids for `count` new rows of `table`, taken before the rows are written (sync's
        state tables: a row's links to rows of its own batch, a child run's parent, are
        then written with it, and its id map needs no reading back).

        Here the ids above the table's highest (and above its `AUTOINCREMENT` counter, which
        a deleted row's id stays under): the connection's write transaction holds the
        database (SQLite's `BEGIN IMMEDIATE`), so no other writer takes them meanwhile."""
        if count <= 0:
            return []
        name = table.name.replace('"', '""')
        top = int(conn.exec_driver_sql(f'SELECT coalesce(max(id), 0) FROM "{name}"').scalar_one())
        counted = conn.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'"
        ).first()
        if counted is not None:
            seq = conn.exec_driver_sql(
                "SELECT seq FROM sqlite_sequence WHERE name = ?", (table.name,)
            ).scalar()
            top = max(top, int(seq or 0))
        return list(range(top + 1, top + 1 + count))

    def update_rows(
        self,
        conn: Connection,
        table: Table,
        keys: Sequence[str],
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> None:
        """Set `columns` of many rows of `table`, each found by its `keys` columns: each of
        `rows` holds the keys' values, then the columns' (sync's links to rows sent after
        their own, its id maps). Here one UPDATE executed for the batch of rows."""
        if not rows:
            return
        names = [*(f"k{at}" for at in range(len(keys))), *(f"v{at}" for at in range(len(columns)))]
        statement = (
            table.update()
            .where(*(table.c[key] == bindparam(f"k{at}") for at, key in enumerate(keys)))
            .values({column: bindparam(f"v{at}") for at, column in enumerate(columns)})
        )
        conn.execute(statement, [dict(zip(names, row, strict=True)) for row in rows])

    def delete_rows(
        self, conn: Connection, table: Table, keys: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> None:
        """Delete many rows of `table`, each found by the values of its `keys` columns (sync's
        id maps of rows gone). Here one DELETE executed for the batch of rows."""
        if not rows:
            return
        names = [f"k{at}" for at in range(len(keys))]
        statement = table.delete().where(
            *(table.c[key] == bindparam(name) for key, name in zip(keys, names, strict=True))
        )
        conn.execute(statement, [dict(zip(names, row, strict=True)) for row in rows])

    def integrity_problems(self, conn: Connection) -> list[str]:
        """What the database's own consistency check of its files says is wrong (`Store.check`);
        empty when it finds nothing, or when the backend has no such check to run."""
        return []

    def foreign_key_violations(self, conn: Connection) -> list[tuple[str, int | None, str]]:
        """Rows whose declared foreign key names a missing parent: (table, rowid, parent
        table). Empty on a backend that enforces foreign keys as it writes."""
        return []

    def stored_as(self, column: Any, kind: str) -> Any:
        """A condition true where `column`'s value is stored as `kind` ("integer", "text")
        or is NULL (`Store.check`); None on a backend whose columns hold only their declared
        type."""
        return None

    def text_faults(self, column: Any) -> tuple[Any, Any, Any] | None:
        """For `Store.check`, three things about a text `column`: a condition true where it
        holds a NUL, one true where it holds a byte outside ASCII (whose UTF-8 must then be
        checked), and its value as bytes; None on a backend whose text is always UTF-8
        without NUL."""
        return None

    def journal_mode(self, conn: Connection) -> str | None:
        """How the database journals its writes, as its connection reports it; None where
        the backend has no such setting (PostgreSQL)."""
        return None

    @abstractmethod
    def database_bytes(self, conn: Connection) -> int:
        """The database's size on disk."""

    def table_columns(self, conn: Connection) -> dict[str, frozenset[str]]:
        """Every table and its columns, in as few queries as the backend allows (SQLAlchemy's
        reflection of all tables at once: one query on PostgreSQL)."""
        found = inspect(conn).get_multi_columns()
        return {name: frozenset(c["name"] for c in cols) for (_, name), cols in found.items()}

    def index_names(self, conn: Connection, tables: Iterable[str]) -> frozenset[str]:
        """The names of the indexes on `tables`."""
        found = inspect(conn).get_multi_indexes(filter_names=list(tables))
        return frozenset(str(index["name"]) for indexes in found.values() for index in indexes)

    @abstractmethod
    def trigger_names(self, conn: Connection, table: str) -> frozenset[str]:
        """The names of the triggers on `table` the store's owner created (`Store.check`)."""

    @abstractmethod
    def altered_triggers(self, conn: Connection, statements: Iterable[str]) -> frozenset[str]:
        """Of the triggers `statements` create (a `…_triggers_sql` list), those present whose
        stored definition is not what the statements make (`Store.check`): SQLite's text of
        the trigger, PostgreSQL's body of the function it runs."""

    # What neutral code asks of a store's backend rather than importing a backend's module
    # (the registry finds the backend by name): a URL's in-memory database, a PostgreSQL
    # schema of its own, the roles' rules, non-UTF-8 text. The defaults are what a backend
    # without the feature answers.

    own_triggers: ClassVar[frozenset[str]] = frozenset()
    """Triggers the package's own rules put on tables (a PostgreSQL centre's roles), which a
    schema check expects beside upstream's."""

    def is_memory(self, url: URL) -> bool:
        """Whether the URL names an in-memory database (nothing on disk)."""
        return False

    def own_schema_of(self, url: URL) -> str | None:
        """The schema of its own `url`'s connections work in (as written, unchecked), else
        None (always None on a backend without schemas)."""
        return None

    def with_own_schema(self, url: URL, schema: str) -> URL:
        """`url` whose connections work in `schema` (a checked name); only a backend with
        schemas is ever given one (`targets.checked_schema` refuses the others)."""
        raise NotImplementedError(f"{self.name} has no schemas")

    def create_own_schema(self, conn: Connection, schema: str) -> bool:
        """Create `schema` (a checked name) unless it exists; whether it was created."""
        raise NotImplementedError(f"{self.name} has no schemas")

    def work_in_own_schema(self, conn: Connection, schema: str) -> None:
        """Make `schema` the whole `search_path` of `conn`'s open transaction."""
        raise NotImplementedError(f"{self.name} has no schemas")

    def own_schema_script(self, schema: str) -> list[str]:
        """What an offline script for a store in `schema` runs first, in its transaction."""
        raise NotImplementedError(f"{self.name} has no schemas")

    def search_path(self, conn: Connection) -> str:
        """The `search_path` `conn` works with ("" on a backend without schemas)."""
        return ""

    def database_exists(self, conn: Connection, name: str) -> bool:
        """Whether the server `conn` is connected to has a database called `name` (a
        backend without a server has only its own)."""
        return True

    def keep_rules(self, conn: Connection) -> None:  # noqa: B027 - no rules by default
        """After an upgrade or a new sync table, in its transaction: bring the roles' rules
        up to date where the store has roles (a PostgreSQL centre); nothing elsewhere."""

    def unguarded_tables(self, conn: Connection) -> list[str]:
        """The tables a follower role may write without the roles' guard (row-level security
        and its policies): what `check` names; none where a store has no roles."""
        return []

    def texts_not_utf8(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[Any],
        *,
        where: Any = None,
        also: Sequence[Any] = (),
    ) -> Iterator[Any]:
        """Every text among `columns` of `table`'s rows (`where`) whose bytes are not UTF-8,
        as `(key, column, raw, start)` with `also`'s values before the key; none on a
        backend whose text is always UTF-8."""
        return iter(())

    def tolerant(self, conn: Connection) -> AbstractContextManager[None]:
        """Within the body, `conn` reads a text whose bytes are not UTF-8 instead of failing
        the whole read (SQLite); nothing to change where text is always UTF-8."""
        return nullcontext()
