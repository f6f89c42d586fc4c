"""Alembic environment for io-harness run stores.

The target is `-x db=PATH_OR_URL`, else `$HARNESS_STORE_URL`, else `sqlite:///runs.sqlite3`.
What the database is (fresh, an io-harness store of some release, torn, newer, foreign) is found
out by `harness_store.detect`; the procedure lives in `harness_store.migrate.run_environment`,
so `alembic upgrade head`, `Store.open` and `harness-store upgrade` share it.
"""

from logging.config import fileConfig

from alembic import context

from harness_store.migrate import run_environment

if context.config.config_file_name is not None:
    fileConfig(context.config.config_file_name, disable_existing_loggers=False)

run_environment(context)
