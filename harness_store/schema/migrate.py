"""Running the Alembic chain: from `alembic upgrade head`, from `Store.open`, from the CLI.

`migrations/env.py` hands its work to `run_environment`, so the command line and the package
share one procedure for an online upgrade or downgrade (the only commands that back up, lock,
stamp or switch anything; `check`, `current` and the like only read):

1. read what the database is (`detect.diagnose`), refusing what must be refused — unchanged;
2. when there is work, `PRAGMA quick_check` a SQLite file: a damaged one is refused, unbacked;
3. open the write transaction (`BEGIN IMMEDIATE`; PostgreSQL's first statement takes an
   advisory lock) and diagnose again — another upgrader may have done the work meanwhile, and
   then this one says so and writes no backup;
4. back up a SQLite file (`backup.take_backup`), while the lock is held;
5. stamp an untracked io-harness store at the release its shape matches and run every step;
6. commit; only then switch a store that reached 0.12 to WAL (it cannot run in a transaction).

A process killed, or a disk filling up, before the commit leaves the store as it was (a failed
attempt's backup is removed). A caller's own connection in a transaction is used as it is: no
backup or WAL switch, and the caller commits.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from logging.config import fileConfig
from pathlib import Path
from typing import TYPE_CHECKING, Any

from alembic import command
from alembic.config import Config
from alembic.operations.ops import AlterColumnOp, ModifyTableOps
from alembic.runtime.environment import EnvironmentContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL

from ..connector import Lent, lend, translated
from ..dialects import backend_for, backend_named, backend_of
from ..engine import make_engine, read_only_url, resolve_target, safe_url, sqlite_path, to_url
from ..errors import (
    InvalidTargetError,
    MalformedStoreError,
    MigrationConnectionError,
    OfflineUpgradeError,
    StoreError,
    StoreNotFoundError,
    UpgradeFailedError,
)
from ..releases import REVISIONS
from ..targets import Target, checked_schema
from .backup import discard, failure_reason, take_backup
from .detect import (
    Diagnosis,
    StoreKind,
    check_sqlite_file,
    diagnose,
    read_only_store,
    writable_file,
)
from .given_connection import given_connection
from .migration_ops import WAL_AFTER_COMMIT
from .preflight import is_disk_full, is_malformed, malformed_message, quick_check
from .x_options import XOptions, parse_x_options

if TYPE_CHECKING:
    from sqlalchemy import MetaData

log = logging.getLogger(__name__)

_RUNNING = threading.RLock()
"""Alembic's `op` and `context` are process globals: one chain runs at a time per process."""

REPORT = "harness_store.report"
TARGET = "harness_store.url"
BACKUP = "harness_store.backup"
CREATE = "harness_store.create"
SCHEMA = "harness_store.schema"
"""The PostgreSQL schema of its own the store lives in (`alembic_config(schema=…)`), as
`-x schema=` names it."""


@dataclass
class UpgradeReport:
    """What an upgrade found and did, for a caller or a person."""

    url: str
    found: Diagnosis | None = None
    before: str | None = None
    """The revision the upgrade started from (as found once it held the lock)."""
    after: str | None = None
    stamped: str | None = None
    backup: Path | None = None
    messages: list[str] = field(default_factory=list)
    raced: bool = False
    """The store needed work when first looked at, but another upgrade did it while this one
    waited for the lock: this one changed nothing and wrote no backup."""
    stage: str = "checking"
    """How far the upgrade got: checking, backup, upgrade, done."""
    on_message: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    """Called with each line as it happens (e.g. to print `found:` before anything changes)."""

    @property
    def changed(self) -> bool:
        """Whether this upgrade changed the store (a revision step or a stamp)."""
        if self.stage != "done" or self.raced:
            return False
        return self.before != self.after or self.stamped is not None

    def say(self, message: str) -> None:
        """Record a line, log it (the `alembic` command shows it), pass it to `on_message`."""
        self.messages.append(message)
        log.info("%s", message)
        if self.on_message is not None:
            self.on_message(message)


def script_location() -> str:
    """The migrations directory, `harness_store/migrations` (the same in a wheel, an editable
    install and a checkout)."""
    candidate = Path(__file__).resolve().parents[1] / "migrations"
    if (candidate / "env.py").is_file():
        return str(candidate)
    raise FileNotFoundError("harness_store's migrations are missing from this installation")


def alembic_config(
    target: str | URL | None = None,
    *,
    backup: bool = True,
    create: bool = True,
    schema: str | None = None,
) -> Config:
    """An Alembic `Config` for the packaged chain, aimed at `target`; `schema`: the
    PostgreSQL schema of its own the store lives in (also for a connection handed over in
    `attributes["connection"]`, which must then be in a transaction: the schema is set for
    that transaction only)."""
    config = Config()
    config.set_main_option("script_location", script_location())
    if target is not None:
        config.attributes[TARGET] = Target.parse(target, schema=schema).url
    if schema is not None:
        config.attributes[SCHEMA] = schema
    config.attributes[BACKUP] = backup
    config.attributes[CREATE] = create
    return config


def upgrade(
    target: str | URL,
    revision: str = "head",
    *,
    backup: bool = True,
    create: bool = True,
    on_message: Callable[[str], None] | None = None,
    connection: Connection | None = None,
    schema: str | None = None,
) -> UpgradeReport:
    """Upgrade the store at `target` to `revision`, creating it when absent unless
    `create=False`; see the module docstring for the steps. `on_message` gets each line of
    the report as it happens (the first is `found: …`, before anything is changed).
    `connection`, a connection to `target` in an open transaction, is upgraded in that
    transaction, which the caller commits or rolls back (sync's dry run). `schema`
    (PostgreSQL): the schema of its own the store lives in, created when absent."""
    url = Target.parse(target, schema=schema).url
    return _run(command.upgrade, url, revision, backup, create, on_message, connection)


def downgrade(
    target: str | URL,
    revision: str,
    *,
    backup: bool = True,
    on_message: Callable[[str], None] | None = None,
    schema: str | None = None,
) -> UpgradeReport:
    """Downgrade the store at `target` to `revision` (a release name such as "0.7"), after a
    backup like an upgrade's: a downgrade drops the data of the releases above `revision`.
    `schema` as `upgrade`'s."""
    url = Target.parse(target, schema=schema).url
    return _run(command.downgrade, url, revision, backup, False, on_message)


def _run(
    step: Callable[[Config, str], None],
    target: str | URL,
    revision: str,
    backup: bool,
    create: bool,
    on_message: Callable[[str], None] | None,
    connection: Connection | None = None,
) -> UpgradeReport:
    """Alembic's `upgrade` or `downgrade` command on the store at `target` (over `connection`
    when given), one at a time in this process, its errors typed; what it found and did."""
    config = alembic_config(target, backup=backup, create=create)
    if connection is not None:
        config.attributes["connection"] = connection
    report = UpgradeReport(safe_url(to_url(target)), on_message=on_message)
    config.attributes[REPORT] = report
    with _RUNNING, _typed_errors(to_url(target).get_backend_name()):
        step(config, revision)
    return report


@contextmanager
def _typed_errors(backend: str) -> Iterator[None]:
    """Raise driver errors as the typed `StoreError`s of `backend` (a SQLAlchemy backend
    name: locked, read-only, …)."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:
        typed = translated(backend_named(backend), exc)
        if typed is None:
            raise
        raise typed from exc


def script_directory() -> ScriptDirectory:
    """The chain as Alembic sees it."""
    return ScriptDirectory.from_config(alembic_config())


# --- env.py ------------------------------------------------------------------------------


def models_metadata() -> MetaData:
    """The models' metadata, imported only by the commands that compare the database with the
    models (`check`, `revision --autogenerate`, `--sql`): an upgrade's steps are written out
    in full and never consult it (it has no naming convention), and importing 37 models is a
    good part of a no-op `alembic upgrade head`'s time."""
    from ..models import Base

    return Base.metadata


def models_metadata_for(dialect_name: str) -> MetaData:
    """The models as a store of `dialect_name` declares them. The models keep upstream's
    SQLite shape, where `id INTEGER PRIMARY KEY` carries no NOT NULL; PostgreSQL makes every
    primary key NOT NULL, so for it the keys are compared as NOT NULL: an intended difference
    is no difference, and a key that lost its NOT NULL still is one."""
    if dialect_name != "postgresql":
        return models_metadata()
    return _keys_not_null()


@functools.cache
def _keys_not_null() -> MetaData:
    from sqlalchemy import MetaData

    source = models_metadata()
    copy = MetaData(naming_convention=source.naming_convention)
    for table in source.sorted_tables:
        table.to_metadata(copy)
    for table in copy.tables.values():
        for column in table.primary_key.columns:
            column.nullable = False
    return copy


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Leave to newer io-harness releases what is theirs: compare only the 0.13 tables."""
    if type_ == "table":
        return name in models_metadata().tables
    return True


def ignore_key_nullability(context: Any, revision: Any, directives: list[Any]) -> None:
    """Drop autogenerate's "primary key nullable" diffs, and only those.

    The models declare upstream's SQLite shape, where `id INTEGER PRIMARY KEY` carries no
    explicit NOT NULL (`PRAGMA table_info` says notnull 0); a store whose key says NOT NULL
    anyway differs from them in nothing worth a migration. A key the database lets be NULL
    where the models say NOT NULL (PostgreSQL's, `models_metadata_for`) is kept: that one is
    real.
    """
    for script in directives:
        for upgrade_ops in script.upgrade_ops_list:
            for table_ops in list(upgrade_ops.ops):
                if not isinstance(table_ops, ModifyTableOps):
                    continue
                table_ops.ops = [
                    op
                    for op in table_ops.ops
                    if not (
                        isinstance(op, AlterColumnOp)
                        and op.modify_nullable is True
                        and _is_key(op.table_name, op.column_name)
                        and not (op.modify_type or op.modify_server_default or op.modify_name)
                    )
                ]
                if not table_ops.ops:
                    upgrade_ops.ops.remove(table_ops)


SERIAL_NOTE = "Detected sequence named '%s' as owned by integer column '%s(%s)'"
"""The start of the line Alembic's PostgreSQL support logs at INFO for every SERIAL key it
reflects (and rightly leaves out of the comparison)."""


class _OwnSerialKeys(logging.Filter):
    """Drops Alembic's note on a SERIAL key of one of the models' tables: said once for
    each of some 35 tables on every `alembic check`, about nothing that differs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(SERIAL_NOTE) or len(record.args or ()) != 3:
            return True
        _, table, column = record.args  # type: ignore[misc]
        model = models_metadata().tables.get(str(table))
        return model is None or str(column) not in model.primary_key.columns


@contextmanager
def _quiet_about_serial_keys() -> Iterator[None]:
    """While a comparison runs, leave out Alembic's notes on the models' SERIAL keys."""
    logger = logging.getLogger("alembic.ddl.postgresql")
    note = _OwnSerialKeys()
    logger.addFilter(note)
    try:
        yield
    finally:
        logger.removeFilter(note)


def _is_key(table: str, column: str) -> bool:
    model = models_metadata().tables.get(table)
    return model is not None and column in model.primary_key.columns


def configure_logging(config: Config) -> None:
    """`fileConfig` the ini's logging, when it has any (`[loggers]`, `[handlers]` and
    `[formatters]`); a minimal ini without them leaves logging as the caller set it."""
    name = config.config_file_name
    if name is None:
        return
    parser = config.file_config
    if all(parser.has_section(s) for s in ("loggers", "handlers", "formatters")):
        fileConfig(name, disable_existing_loggers=False)


def run_environment(context: EnvironmentContext) -> None:
    """The body of `migrations/env.py`. Run by Alembic's own command line, a store's error —
    a driver's typed first — is told as Alembic tells its own: one `FAILED:` line and no
    traceback (`--raiseerr` shows it); called from code, errors leave as they are."""
    if context.config.cmd_opts is None:
        _run_environment(context, typed=False)
        return
    try:
        _run_environment(context, typed=True)
    except StoreError as exc:
        raise CommandError(" ".join(str(exc).split())) from exc


def _run_environment(context: EnvironmentContext, *, typed: bool) -> None:
    """Read the `-x` options (refusing a mistyped one before anything is touched), then the
    database to work on: the connection or engine handed over in `config.attributes`, which
    alone decides the dialect online and offline, or else the target (`_target`)."""
    cmd_opts = context.config.cmd_opts
    options = parse_x_options(getattr(cmd_opts, "x", None) or [])
    given = given_connection(context.config.attributes.get("connection"))
    schema = options.schema or context.config.attributes.get(SCHEMA)
    url: URL | None = None
    if given is not None:
        backend = given.dialect.name
        if schema is not None:
            checked_schema(schema, backend)
    else:
        target = Target.parse(_target(context, options), schema=schema)
        url, schema = target.url, target.schema
        backend = url.get_backend_name()
    with _typed_errors(backend) if typed else nullcontext():
        if context.is_offline_mode():
            _run_offline(context, given, url, schema)
        else:
            _run_online(context, given, url, options, schema)


def _target(context: EnvironmentContext, options: XOptions) -> URL:
    """The store to work on when no connection was handed over: the caller's target, else
    `-x db`, else `$HARNESS_STORE_URL`, else `./runs.sqlite3`."""
    config = context.config
    if TARGET in config.attributes:
        return to_url(config.attributes[TARGET])
    return resolve_target(options.db)


def _run_offline(
    context: EnvironmentContext,
    given: Connection | Engine | None,
    url: URL | None,
    schema: str | None = None,
) -> None:
    """Render the script for the dialect of what was handed over, else of the target. An
    `upgrade --sql` given no starting revision, aimed at an existing SQLite file, starts from
    what that store is (`_offline_start`); 0.12's switch to WAL, owed by a script that runs
    0.12's step or by a store past 0.12 that is not in WAL, comes after its COMMIT, where
    SQLite honours it. A store in a schema of its own: the script creates the schema and works
    in it for its transaction (`Backend.own_schema_script`)."""
    found: Diagnosis | None = None
    context.config.attributes.pop(WAL_AFTER_COMMIT, None)
    if given is not None:
        url = given.url if isinstance(given, Engine) else given.engine.url
    elif url is not None:
        found = _offline_start(context, url)
    start: dict[str, Any] = {}
    if found is not None and found.revision is not None:
        if found.kind is StoreKind.TRACKED:
            start["starting_rev"] = found.revision
        else:
            start["fn"] = _stamped_then(context, found.revision)
    context.configure(
        url=url,
        target_metadata=models_metadata(),
        literal_binds=True,
        transactional_ddl=True,
        include_object=include_object,
        **start,
    )
    with context.begin_transaction():
        own = [] if schema is None or url is None else backend_of(url).own_schema_script(schema)
        for statement in own:
            context.execute(statement)
        context.run_migrations()
    if context.config.attributes.pop(WAL_AFTER_COMMIT, False):
        assert url is not None
        for statement in backend_named(url.get_backend_name()).wal_sql():
            context.execute(statement)


def _offline_start(context: EnvironmentContext, url: URL) -> Diagnosis | None:
    """What the SQLite store at `url` is, read through a read-only connection, when this is
    an `upgrade --sql` given no starting revision (`FROM:TO`) and the file exists: the script
    then upgrades that store from its revision (stamping an io-harness store at its release
    first), as an online upgrade would. Anything else — no file, another command, a starting
    revision given, a server (a script for PostgreSQL needs none) — renders as asked. A store
    torn between two releases is refused: which of the next release's statements it holds is
    what no fixed script can know. A store past 0.12 not in WAL is owed the switch, as online
    (`_owes_wal`)."""
    opts = context_opts(context)
    if getattr(opts.get("fn"), "__name__", "") != "upgrade" or opts.get("starting_rev"):
        return None
    path = sqlite_path(url)
    if path is None or not path.exists():
        return None
    check_sqlite_file(path, writable=False)
    engine = make_engine(read_only_url(url))
    try:
        with lend(engine) as lent, _stage("checking", str(path)), lent.reading():
            found = diagnose(lent.conn, shape=False)
            if found.torn_of is None and _owes_wal(lent.conn, found.revision):
                context.config.attributes[WAL_AFTER_COMMIT] = True
    finally:
        engine.dispose()
    log.info("found: %s", found.describe())
    if found.torn_of is not None:
        raise OfflineUpgradeError(
            f"{path}: {found.describe()}; no script can tell which of "
            f"{found.torn_of}'s statements it holds, so none was written — upgrade it online "
            "(`alembic upgrade head` without --sql, or `harness-store upgrade`)"
        )
    return found


def _stamped_then(context: EnvironmentContext, revision: str) -> Callable[..., Iterator[Any]]:
    """The steps of an offline upgrade of an untracked io-harness store: Alembic's stamp at
    `revision` (the version table created and its row inserted, as `stamp REV --sql`
    writes them), then the command's own steps from there."""
    upgrade_steps = context_opts(context)["fn"]
    script = context.script

    def steps(heads: tuple[str, ...], migration: Any) -> Iterator[Any]:
        yield from script._stamp_revs(revision, heads)
        yield from upgrade_steps((revision,), migration)

    return steps


def _run_online(
    context: EnvironmentContext,
    given: Connection | Engine | None,
    url: URL | None,
    options: XOptions,
    schema: str | None = None,
) -> None:
    config = context.config
    report = config.attributes.get(REPORT)
    if given is not None:
        with lend(given) as lent:
            if schema is not None:
                _work_in(lent.conn, schema)
            _migrate(context, lent, report=report, schema=schema)
        return
    assert url is not None
    path = sqlite_path(url)
    changing = _changes_revision(context)
    read_only = False
    if path is not None:
        creating = changing and config.attributes.get(CREATE, True)
        stamping = getattr(context_opts(context).get("fn"), "__name__", "") in STAMPING
        check_sqlite_file(path, writable=stamping, missing=None if creating else "")
        if not path.parent.is_dir():
            raise StoreNotFoundError(f"cannot create a store at {path}: no directory {path.parent}")
        read_only = path.exists() and not (writable_file(path) and os.access(path.parent, os.W_OK))
    # A file that cannot be written (read-only media) is read read-only: `check`, `current`
    # and an upgrade with nothing to do write nothing; one with work is refused (`_migrate`).
    engine = make_engine(read_only_url(url) if read_only else url)
    report = report or UpgradeReport(safe_url(url))
    backup = config.attributes.get(BACKUP, True) if options.backup is None else options.backup
    try:
        with lend(engine) as lent:
            _migrate(context, lent, report=report, path=path, backup=backup, read_only=read_only)
    except Exception as exc:
        if path is None or report.stage != "checking" or isinstance(exc, StoreError):
            raise
        if not is_disk_full(exc):
            raise
        raise UpgradeFailedError(  # before anything was written: the open itself needs room
            f"{path}: the disk is full, so the store could not even be opened to look at it; "
            "it is unchanged. Free some space and run it again",
            stage="checking",
            unchanged=True,
        ) from exc
    finally:
        engine.dispose()


def _work_in(conn: Connection, schema: str) -> None:
    """Work in `schema` on a connection handed over, for its transaction only (`SET LOCAL`):
    the caller's own statements after it commits see their own `search_path` again. One not
    in a transaction is refused, unchanged: a session-wide `search_path` would outlive the
    upgrade."""
    if not conn.in_transaction():
        raise MigrationConnectionError(
            f"a connection handed over to work in the schema {schema!r} must be in a "
            "transaction (`engine.begin()`), which the schema is set for alone; nothing was "
            "migrated"
        )
    backend_for(conn).work_in_own_schema(conn, schema)


def _changes_revision(context: EnvironmentContext) -> bool:
    """Whether this command is an online upgrade or downgrade — the only ones that back up,
    lock, stamp an untracked store or switch its journal. `check`, `current`, `stamp`,
    `revision --autogenerate` and `--sql` runs do none of that."""
    opts = context_opts(context)
    fn = opts.get("fn")
    return (
        getattr(fn, "__name__", "") in ("upgrade", "downgrade")
        and not opts.get("as_sql")
        and not opts.get("dont_mutate")
    )


STAMPING = frozenset({"do_stamp", "do_ensure_version"})
"""The `fn` of the Alembic commands whose job is to write `alembic_version` itself."""


def context_opts(context: EnvironmentContext) -> dict[str, Any]:
    """The options the Alembic command gave its environment (`fn`, `as_sql`, …)."""
    env = getattr(context, "_proxy", context)  # `alembic.context` proxies the real one
    opts: dict[str, Any] = env.context_opts
    return opts


def _planned(context: EnvironmentContext, found: Diagnosis) -> list[Any]:
    """The steps this command would run on a store found as `found` (after its stamp)."""
    migration = context.get_context()
    fn = migration.opts.get("fn")
    if fn is None:
        return []
    heads = (found.revision,) if found.revision is not None else ()
    return list(fn(heads, migration))


def _migrate(
    context: EnvironmentContext,
    lent: Lent,
    *,
    report: UpgradeReport | None,
    path: Path | None = None,
    backup: bool = False,
    read_only: bool = False,
    schema: str | None = None,
) -> None:
    conn = lent.conn
    schema = schema or Target.parse(conn.engine.url).schema
    changing = _changes_revision(context)
    fn_name = getattr(context_opts(context).get("fn"), "__name__", "")
    context.configure(
        connection=conn,
        target_metadata=None if changing else models_metadata_for(conn.dialect.name),
        transactional_ddl=True,
        include_object=include_object,
        process_revision_directives=ignore_key_nullability,
        # `check`, `current`, `revision --autogenerate` must not even create alembic_version;
        # `stamp` is asked to write it.
        dont_mutate=not changing and fn_name not in STAMPING,
    )
    report = report or UpgradeReport(safe_url(conn.engine.url))
    external = conn.in_transaction()
    where = str(path) if path is not None else safe_url(conn.engine.url)

    with _stage("checking", where), lent.reading():
        if schema is not None:
            _refuse_lost_schema(conn, schema, where)
        found = diagnose(conn, shape=False)
    report.found = found
    report.before = found.revision
    report.say(f"found: {found.describe()}")
    if not changing:
        with _quiet_about_serial_keys(), context.begin_transaction():
            context.run_migrations()
        return

    had_work = _needs_stamp(found) or bool(_planned(context, found))
    if had_work and read_only and path is not None:
        raise read_only_store(path)
    if not had_work:
        # Already there: no write lock, no backup, no second look; only the WAL switch a
        # store at 0.12 or later may still be owed (a journal mode changed back by hand).
        with context.begin_transaction():
            context.run_migrations()
        report.stage = "done"
        if not external and not read_only:
            _switch_to_wal_after(context, lent, report, found.revision)
        report.after = found.revision
        report.say(f"now at {found.revision}")
        return
    if had_work and path is not None:
        with _stage("checking", where), lent.reading():
            quick_check(conn, where)
    backend = backend_for(conn)
    if found.kind is StoreKind.EMPTY and not external:
        with lent.reading():  # before the write lock: SQLite takes it only then
            backend.before_first_table(conn)
    try:
        with lent.writing(), context.begin_transaction():
            # First statement of the write transaction: serialise upgraders (SQLite's
            # BEGIN IMMEDIATE already has; PostgreSQL takes an advisory lock), then look
            # again — a concurrent upgrader may have done the work while this one waited.
            backend.lock_for_upgrade(conn)
            if schema is not None and backend.create_own_schema(conn, schema):
                report.say(f"created the schema {schema}")
            found = diagnose(conn, shape=False)
            report.before = found.revision
            work = _needs_stamp(found) or bool(_planned(context, found))
            if not work:
                report.raced = had_work
                if had_work:
                    report.say("nothing to do: another upgrade finished it while this one waited")
            keep = work and found.kind is not StoreKind.EMPTY and path is not None
            if keep and backup and path is not None and not external:
                report.stage = "backup"
                report.backup = take_backup(path, found.revision or "base")
                report.say(f"backup: {report.backup}")
            report.stage = "upgrade"
            if work and _needs_stamp(found):
                context.get_context().stamp(context.script, found.revision)  # type: ignore[arg-type]
                report.stamped = found.revision
                report.say(f"stamped at {found.revision}")
            context.run_migrations()
            if work:
                backend.keep_rules(conn)  # the tables a revision made get the roles' rules
    except BaseException as exc:
        failed = report.stage
        if failed == "upgrade" and report.backup is not None:
            # The transaction rolled back: the store is what the backup holds.
            discard(report.backup)
            report.backup = None
        full = failed == "upgrade" and isinstance(exc, Exception) and is_disk_full(exc)
        if full and report.found is not None and report.found.kind is StoreKind.EMPTY:
            raise UpgradeFailedError(  # a store being made (by `copy`, `sync`, an open)
                f"{where}: the disk is full; no store was created (what was begun was rolled "
                "back). Free some space and run it again",
                stage="upgrade",
                unchanged=True,
            ) from exc
        if full:
            raise UpgradeFailedError(
                f"{where}: the upgrade failed while migrating ({failure_reason(exc)}); it was "
                "rolled back, so "
                "the store is unchanged, and its backup was removed. Free some space (the "
                "upgrade needs about the store's size for the backup plus its journal) and "
                "run it again",
                stage="upgrade",
                unchanged=True,
            ) from exc
        raise
    report.stage = "done"
    with lent.reading():
        after = diagnose(conn, shape=False)
    if not external:
        _switch_to_wal_after(context, lent, report, after.revision)
    report.after = after.revision
    report.say(f"now at {after.revision}")


def _refuse_lost_schema(conn: Connection, schema: str, where: str) -> None:
    """Refuse, before anything is read or written, a connection that does not work in the
    store's schema: its startup option was dropped on the way (a pooler such as PgBouncer),
    and the chain would land in the schema the connection has instead."""
    found = backend_for(conn).search_path(conn)
    if found != schema:
        raise InvalidTargetError(
            f"{where}: the connection works in {found!r}, not the store's schema {schema!r}: "
            "the startup option that sets it did not reach the server (a pooler in between "
            "drops it); connect to the server directly. Nothing was changed"
        )


def _needs_stamp(found: Diagnosis) -> bool:
    """An untracked io-harness store is stamped at its release before the chain runs."""
    return found.kind in (StoreKind.UPSTREAM, StoreKind.NEWER) and found.revision is not None


@contextmanager
def _stage(stage: str, where: str) -> Iterator[None]:
    """Raise a damaged file as `MalformedStoreError`, whatever statement met it."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:
        if is_malformed(exc):
            raise MalformedStoreError(malformed_message(where, str(exc))) from exc
        raise


def _switch_to_wal_after(
    context: EnvironmentContext, lent: Lent, report: UpgradeReport, revision: str | None
) -> None:
    """After an upgrade to 0.12 or later has committed, switch the file to WAL (0.12's rule).

    The switch cannot run inside the upgrade's transaction; running it only after the commit
    means a failed upgrade leaves even the file header as it was. If the switch itself fails
    (a full disk), the store is upgraded but still in its old journal mode — io-harness and
    `Store.open` switch it on their next open — and the report says so. `revision` is the one
    the store is at now.
    """
    opts = context.get_context().opts
    if getattr(opts.get("fn"), "__name__", "") != "upgrade":
        return
    conn = lent.conn
    with lent.reading():
        switch = _owes_wal(conn, revision)
    if not switch:
        return
    try:
        backend_for(conn).switch_connection_to_wal(conn)
    except Exception as exc:
        report.say(
            f"the upgrade committed, but switching the store to WAL failed ({exc}); "
            "io-harness or Store.open switches it on the next open"
        )
        return
    report.say("switched the store to WAL (io-harness 0.12)")


def _owes_wal(conn: Connection, revision: str | None) -> bool:
    """Whether a store at `revision` is owed 0.12's switch to WAL: it is at 0.12 or later and
    its file is not in WAL yet."""
    past = revision in REVISIONS and REVISIONS.index(revision) >= REVISIONS.index("0.12")
    return past and backend_for(conn).needs_wal_switch(conn)
