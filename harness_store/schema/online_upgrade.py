"""An online upgrade or downgrade, the steps the `migrate` module's docstring lists: read the
store, check it, take the write lock, look again, back it up, stamp it, run the chain, commit,
then switch to WAL (`wal_switch`); on a connection the connector lends (`lend`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from alembic.runtime.environment import EnvironmentContext
from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL

from ..connector import Lent, lend
from ..dialects import backend_for
from ..engine import make_engine, read_only_url, safe_url, sqlite_path
from ..errors import (
    InvalidTargetError,
    MigrationConnectionError,
    StoreError,
    StoreNotFoundError,
    UpgradeFailedError,
)
from ..targets import Target
from .backup import discard, failure_reason, take_backup
from .detect import (
    Diagnosis,
    StoreKind,
    check_sqlite_file,
    diagnose,
    read_only_store,
    writable_file,
)
from .environment_options import BACKUP, CREATE, REPORT, STAMPING, changes_revision, context_opts
from .model_comparison import (
    ignore_key_nullability,
    include_object,
    models_metadata_for,
    quiet_about_serial_keys,
)
from .preflight import checked_stage, is_disk_full, quick_check
from .upgrade_report import UpgradeReport
from .wal_switch import switch_to_wal_after
from .x_options import XOptions


def run_online(
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
    changing = changes_revision(context)
    read_only = False
    if path is not None:
        creating = changing and config.attributes.get(CREATE, True)
        stamping = getattr(context_opts(context).get("fn"), "__name__", "") in STAMPING
        check_sqlite_file(path, writable=stamping, missing=None if creating else "")
        if not path.parent.is_dir():
            raise StoreNotFoundError(f"cannot create a store at {path}: no directory {path.parent}")
        read_only = path.exists() and not (writable_file(path) and os.access(path.parent, os.W_OK))
    # A file that cannot be written (read-only media) is read read-only: `check`, `current`
    # and an upgrade with nothing to do write nothing; one with work is refused (`_migrate` here).
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
    changing = changes_revision(context)
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

    with checked_stage("checking", where), lent.reading():
        if schema is not None:
            _refuse_lost_schema(conn, schema, where)
        found = diagnose(conn, shape=False)
    report.found = found
    report.before = found.revision
    report.say(f"found: {found.describe()}")
    if not changing:
        with quiet_about_serial_keys(), context.begin_transaction():
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
            switch_to_wal_after(context, lent, report, found.revision)
        report.after = found.revision
        report.say(f"now at {found.revision}")
        return
    if had_work and path is not None:
        with checked_stage("checking", where), lent.reading():
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
        switch_to_wal_after(context, lent, report, after.revision)
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
