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

The procedure's parts, one concept a module: what a caller and the Alembic command hand the
environment (`environment_options`), what it reports (`upgrade_report`), the online steps
(`online_upgrade`) and the WAL switch after them (`wal_switch`), the offline script
(`offline_script`), and the comparison's hooks (`model_comparison`). This module holds what
users and `migrations/env.py` call, and `__all__` names it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from logging.config import fileConfig
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection
from sqlalchemy.engine import URL

from ..connector import translated
from ..dialects import backend_named
from ..engine import resolve_target, safe_url, to_url
from ..errors import StoreError
from ..targets import Target, checked_schema
from .environment_options import BACKUP, CREATE, REPORT, SCHEMA, TARGET
from .given_connection import given_connection
from .model_comparison import (
    ignore_key_nullability,
    include_object,
    models_metadata,
    models_metadata_for,
)
from .offline_script import run_offline
from .online_upgrade import run_online
from .upgrade_report import UpgradeReport
from .x_options import XOptions, parse_x_options

__all__ = [
    "UpgradeReport",
    "alembic_config",
    "configure_logging",
    "downgrade",
    "ignore_key_nullability",
    "include_object",
    "models_metadata",
    "models_metadata_for",
    "run_environment",
    "script_directory",
    "script_location",
    "upgrade",
]

_RUNNING = threading.RLock()
"""Alembic's `op` and `context` are process globals: one chain runs at a time per process."""


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
            run_offline(context, given, url, schema)
        else:
            run_online(context, given, url, options, schema)


def _target(context: EnvironmentContext, options: XOptions) -> URL:
    """The store to work on when no connection was handed over: the caller's target, else
    `-x db`, else `$HARNESS_STORE_URL`, else `./runs.sqlite3`."""
    config = context.config
    if TARGET in config.attributes:
        return to_url(config.attributes[TARGET])
    return resolve_target(options.db)
