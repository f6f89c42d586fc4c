"""What the migration environment is handed besides `-x` (`x_options`): the attributes a
caller sets on Alembic's `Config` (`REPORT`, `TARGET`, `BACKUP`, `CREATE`, `SCHEMA`) and the
options of the Alembic command running it (`context_opts`: is it an online upgrade or
downgrade, a stamp)."""

from __future__ import annotations

from typing import Any

from alembic.runtime.environment import EnvironmentContext

REPORT = "harness_store.report"
TARGET = "harness_store.url"
BACKUP = "harness_store.backup"
CREATE = "harness_store.create"
SCHEMA = "harness_store.schema"
"""The PostgreSQL schema of its own the store lives in (`alembic_config(schema=…)`), as
`-x schema=` names it."""


def changes_revision(context: EnvironmentContext) -> bool:
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
