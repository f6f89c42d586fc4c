"""Running the Alembic chain: from `alembic upgrade head`, from `Store.open`, from the CLI.

`migrations/env.py` hands its work to `run_environment`, so the command line and the package
share one procedure for an online upgrade of a SQLite file store:

1. read what the database is (`detect.diagnose`), refusing what must be refused — unchanged;
2. take a consistent backup with SQLite's online backup API, unless told not to;
3. switch the file to WAL first if the plan crosses 0.12 (the switch cannot run inside a
   transaction; doing it here keeps the upgrade itself one transaction);
4. in one `BEGIN IMMEDIATE` transaction: diagnose again (another process may have upgraded
   meanwhile), stamp an untracked io-harness store at the release its shape matches, and run
   every step. A process killed anywhere leaves the store as it was; a second upgrader waits on
   the lock and then finds the work done.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.operations.ops import AlterColumnOp, ModifyTableOps
from alembic.runtime.environment import EnvironmentContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError

from .detect import Diagnosis, StoreKind, check_sqlite_file, diagnose
from .dialects import backend_for, backend_named
from .dialects.sqlite import WRITE
from .engine import make_engine, resolve_target, safe_url, sqlite_path, to_url
from .errors import StoreError, StoreNotFoundError
from .models import Base
from .releases import HEAD, REVISIONS, revision_for

log = logging.getLogger("harness_store.migrate")

_RUNNING = threading.RLock()
"""Alembic's `op` and `context` are process globals: one chain runs at a time per process."""

REPORT = "harness_store.report"
TARGET = "harness_store.url"
BACKUP = "harness_store.backup"
CREATE = "harness_store.create"


@dataclass
class UpgradeReport:
    """What an upgrade found and did, for a caller or a person."""

    url: str
    found: Diagnosis | None = None
    before: str | None = None
    after: str | None = None
    stamped: str | None = None
    backup: Path | None = None
    messages: list[str] = field(default_factory=list)

    def say(self, message: str) -> None:
        """Record a line and log it (the `alembic` command shows it)."""
        self.messages.append(message)
        log.info("%s", message)


def script_location() -> str:
    """The migrations directory: inside the installed package, or the checkout's top level."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "migrations", here.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return str(candidate)
    raise FileNotFoundError("harness_store's migrations are missing from this installation")


def alembic_config(
    target: str | URL | None = None, *, backup: bool = True, create: bool = True
) -> Config:
    """An Alembic `Config` for the packaged chain, aimed at `target`."""
    config = Config()
    config.set_main_option("script_location", script_location())
    if target is not None:
        config.attributes[TARGET] = to_url(target)
    config.attributes[BACKUP] = backup
    config.attributes[CREATE] = create
    return config


def upgrade(
    target: str | URL, revision: str = "head", *, backup: bool = True, create: bool = True
) -> UpgradeReport:
    """Upgrade the store at `target` to `revision`; see the module docstring for the steps."""
    config = alembic_config(target, backup=backup, create=create)
    report = UpgradeReport(safe_url(to_url(target)))
    config.attributes[REPORT] = report
    with _RUNNING, _typed_errors(target):
        command.upgrade(config, revision)
    return report


def downgrade(target: str | URL, revision: str, *, backup: bool = True) -> UpgradeReport:
    """Downgrade the store at `target` to `revision` (a release name such as "0.7")."""
    config = alembic_config(target, backup=backup)
    report = UpgradeReport(safe_url(to_url(target)))
    config.attributes[REPORT] = report
    with _RUNNING, _typed_errors(target):
        command.downgrade(config, revision)
    return report


@contextmanager
def _typed_errors(target: str | URL) -> Iterator[None]:
    """Raise driver errors as the backend's typed `StoreError`s (locked, read-only, …)."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:
        orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
        typed = backend_named(to_url(target).get_backend_name()).translate_error(orig)
        if typed is None:
            raise
        raise typed from exc


def script_directory() -> ScriptDirectory:
    """The chain as Alembic sees it."""
    return ScriptDirectory.from_config(alembic_config())


# --- env.py ------------------------------------------------------------------------------


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Leave to newer io-harness releases what is theirs: compare only the 0.13 tables."""
    if type_ == "table":
        return name in Base.metadata.tables
    return True


def ignore_key_nullability(context: Any, revision: Any, directives: list[Any]) -> None:
    """Drop autogenerate's "primary key nullability" diffs, and only those.

    The models declare upstream's SQLite shape, where `id INTEGER PRIMARY KEY` carries no
    explicit NOT NULL (`PRAGMA table_info` says notnull 0); PostgreSQL makes every primary key
    NOT NULL by itself. Neither is a difference worth a migration.
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
                        and op.modify_nullable is not None
                        and _is_key(op.table_name, op.column_name)
                        and not (op.modify_type or op.modify_server_default or op.modify_name)
                    )
                ]
                if not table_ops.ops:
                    upgrade_ops.ops.remove(table_ops)


def _is_key(table: str, column: str) -> bool:
    model = Base.metadata.tables.get(table)
    return model is not None and column in model.primary_key.columns


def run_environment(context: EnvironmentContext) -> None:
    """The body of `migrations/env.py`."""
    if context.is_offline_mode():
        _run_offline(context)
    else:
        _run_online(context)


def _target(context: EnvironmentContext) -> URL:
    config = context.config
    if TARGET in config.attributes:
        return to_url(config.attributes[TARGET])
    return resolve_target(context.get_x_argument(as_dictionary=True).get("db"))


def _run_offline(context: EnvironmentContext) -> None:
    url = _target(context)
    context.configure(
        url=url,
        target_metadata=Base.metadata,
        literal_binds=True,
        transactional_ddl=True,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run_online(context: EnvironmentContext) -> None:
    config = context.config
    given = config.attributes.get("connection")
    if isinstance(given, Connection):
        _migrate(context, given, report=config.attributes.get(REPORT))
        return
    if isinstance(given, Engine):
        with given.connect() as conn:
            _migrate(context, conn, report=config.attributes.get(REPORT))
        return
    url = _target(context)
    path = sqlite_path(url)
    if path is not None:
        check_sqlite_file(path)
        if not path.exists() and not config.attributes.get(CREATE, True):
            raise StoreNotFoundError(f"no run store at {path}")
        if not path.parent.is_dir():
            raise StoreNotFoundError(f"cannot create a store at {path}: no directory {path.parent}")
    engine = make_engine(url)
    report = config.attributes.get(REPORT) or UpgradeReport(safe_url(url))
    backup = config.attributes.get(BACKUP, True)
    if str(context.get_x_argument(as_dictionary=True).get("backup", "")).lower() in ("no", "0"):
        backup = False
    try:
        with engine.connect() as conn:
            _migrate(context, conn, report=report, path=path, backup=backup)
    finally:
        engine.dispose()


@contextmanager
def _writing(conn: Connection, write: bool) -> Iterator[None]:
    """Make the connection's next transactions take the write lock up front (SQLite)."""
    previous = conn.info.get(WRITE)
    conn.info[WRITE] = write
    try:
        yield
    finally:
        conn.info[WRITE] = previous


def _migrate(
    context: EnvironmentContext,
    conn: Connection,
    *,
    report: UpgradeReport | None,
    path: Path | None = None,
    backup: bool = False,
) -> None:
    context.configure(
        connection=conn,
        target_metadata=Base.metadata,
        transactional_ddl=True,
        include_object=include_object,
        process_revision_directives=ignore_key_nullability,
    )
    opts = context.get_context().opts
    mutating = not opts.get("dont_mutate") and not opts.get("as_sql")
    report = report or UpgradeReport(safe_url(conn.engine.url))
    backend = backend_for(conn)

    with conn.begin():
        found = diagnose(conn)
    report.found = found
    report.before = found.revision
    report.say(f"found: {found.describe()}")
    if not mutating:
        with context.begin_transaction():
            context.run_migrations()
        return

    has_work = found.kind is not StoreKind.EMPTY and not found.at_head
    if backup and has_work and path is not None and path.exists():
        report.backup = take_backup(conn, path, found)
        report.say(f"backup: {report.backup}")
    if _crosses_wal_release(context, found):
        with conn.begin():
            switch = backend.needs_wal_switch(conn)
        if switch:
            backend.switch_to_wal(conn.connection.driver_connection)
            report.say("switched the store to WAL (io-harness 0.12)")

    with _writing(conn, True), context.begin_transaction():
        found = diagnose(conn)
        if found.kind in (StoreKind.UPSTREAM, StoreKind.NEWER) and found.revision is not None:
            context.get_context().stamp(context.script, found.revision)
            report.stamped = found.revision
            report.say(f"stamped at {found.revision}")
        context.run_migrations()
    with conn.begin():
        after = diagnose(conn)
    report.after = after.revision
    report.say(f"now at {after.revision}")


def _crosses_wal_release(context: EnvironmentContext, found: Diagnosis) -> bool:
    """Whether this run upgrades a store from below 0.12 to 0.12 or later."""
    opts = context.get_context().opts
    fn = opts.get("fn")
    if getattr(fn, "__name__", "") != "upgrade":
        return False
    destination = str(opts.get("destination_rev") or "")
    if destination in ("head", "heads"):
        destination = HEAD
    try:
        destination = revision_for(destination)  # a release name such as "0.40"
    except KeyError:
        return False
    if destination not in REVISIONS:
        return False
    start = REVISIONS.index(found.revision) if found.revision in REVISIONS else -1
    return start < REVISIONS.index("0.12") <= REVISIONS.index(destination)


def take_backup(conn: Connection, path: Path, found: Diagnosis) -> Path:
    """Copy the store with SQLite's online backup API before it is changed; return the copy's
    path (`<store>.<revision>-<UTC stamp>.bak`)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    label = found.revision or "base"
    destination = path.with_name(f"{path.name}.{label}-{stamp}.bak")
    partial = destination.with_name(destination.name + ".partial")
    source = conn.connection.driver_connection
    assert isinstance(source, sqlite3.Connection)
    copy = sqlite3.connect(partial)
    try:
        source.backup(copy)
    finally:
        copy.close()
    # Only a whole copy ever carries the backup's name: a kill above leaves a `.partial`.
    os.replace(partial, destination)
    return destination
