"""The store's schema lifecycle, one concept per module:

- `releases`: the upstream releases as facts (each one's tables, columns and indexes) and the
  revision names;
- `detect`: what a database is (a release's store, torn, newer, foreign);
- `migrate`: the one upgrade and downgrade procedure `alembic`, `Store.open` and
  `harness-store upgrade` share, over `online_upgrade` (its steps on a live store),
  `wal_switch` (0.12's switch to WAL after the commit), `offline_script` (`--sql`),
  `upgrade_report` (what it found and did), `environment_options` (what a caller and the
  Alembic command hand the environment) and `model_comparison` (the models as `alembic check`
  and autogenerate compare them);
- `backup`: the copy of a SQLite store taken before its revision changes;
- `preflight`: the checks made before and around it (readable, malformed, disk full);
- `migration_ops`: the helpers the revisions in `harness_store.migrations` are written with.
- `copy_marker`: the mark of a copy killed before its commit, which every reader refuses;
- `given_connection`: the connection a caller hands the migration environment, unwrapped or
  refused;
- `x_options`: the `alembic -x` options the environment reads, parsed strictly;
- `release_labels`: the release names each revision answers to, and only its own shown;
- `app_autogenerate`: the hooks an application's own `env.py` leaves a store in a schema of its
  own alone with.

The names a user calls are here too, imported on first use so that importing the package
loads no Alembic: `upgrade`, `downgrade`, `UpgradeReport`, `alembic_config`,
`script_location`, `revision_for`, `own_indexes_at`, `indexes_at`, `backup_name` and
`leave_store_alone`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:
    from ..releases import indexes_at, own_indexes_at, revision_for
    from .app_autogenerate import leave_store_alone
    from .backup import backup_name
    from .migrate import UpgradeReport, alembic_config, downgrade, script_location, upgrade

LAZY = {
    "upgrade": "migrate",
    "downgrade": "migrate",
    "UpgradeReport": "migrate",
    "alembic_config": "migrate",
    "script_location": "migrate",
    "revision_for": ".releases",
    "own_indexes_at": ".releases",
    "indexes_at": ".releases",
    "backup_name": "backup",
    "leave_store_alone": "app_autogenerate",
}
"""Where each public name lives, relative to this package (`.releases`: the package's
`releases`, below the schema); `migrate` brings Alembic, which detection and the Store's
reads of the release facts do not need."""


__getattr__ = lazy_names(__name__, LAZY)


__all__ = [
    "UpgradeReport",
    "alembic_config",
    "backup_name",
    "downgrade",
    "indexes_at",
    "leave_store_alone",
    "own_indexes_at",
    "revision_for",
    "script_location",
    "upgrade",
]
