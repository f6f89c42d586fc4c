"""An offline upgrade or downgrade (`--sql`): the script rendered for the dialect of the target,
starting, for an existing SQLite store, from what that store is."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from alembic.runtime.environment import EnvironmentContext
from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL

from ..connector import lend
from ..dialects import backend_named, backend_of
from ..engine import make_engine, read_only_url, sqlite_path
from ..errors import OfflineUpgradeError
from .detect import (
    Diagnosis,
    StoreKind,
    check_sqlite_file,
    diagnose,
)
from .environment_options import context_opts
from .migration_ops import WAL_AFTER_COMMIT
from .model_comparison import include_object, models_metadata
from .preflight import checked_stage
from .upgrade_report import log
from .wal_switch import owes_wal


def run_offline(
    context: EnvironmentContext,
    given: Connection | Engine | None,
    url: URL | None,
    schema: str | None = None,
) -> None:
    """Render the script for the dialect of what was handed over, else of the target. An
    `upgrade --sql` given no starting revision, aimed at an existing SQLite file, starts from
    what that store is (`_offline_start` here); 0.12's switch to WAL, owed by a script that runs
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
    (`owes_wal`)."""
    opts = context_opts(context)
    if getattr(opts.get("fn"), "__name__", "") != "upgrade" or opts.get("starting_rev"):
        return None
    path = sqlite_path(url)
    if path is None or not path.exists():
        return None
    check_sqlite_file(path, writable=False)
    engine = make_engine(read_only_url(url))
    try:
        with lend(engine) as lent, checked_stage("checking", str(path)), lent.reading():
            found = diagnose(lent.conn, shape=False)
            if found.torn_of is None and owes_wal(lent.conn, found.revision):
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
