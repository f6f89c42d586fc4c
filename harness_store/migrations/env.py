"""Alembic environment for io-harness run stores.

The target is `-x db=PATH_OR_URL`, else `$HARNESS_STORE_URL`, else `sqlite:///runs.sqlite3`.
What the database is (fresh, an io-harness store of some release, torn, newer, foreign) is found
out by `harness_store.schema.detect`; the procedure lives in
`harness_store.schema.migrate.run_environment`, so `alembic upgrade head`, `Store.open` and
`harness-store upgrade` share it.

Logging is configured from the ini only when it has logging sections: a two-line ini
(`[alembic]` + `script_location = harness_store:migrations`) is enough to run the chain.
"""

from alembic import context

from harness_store.schema.migrate import configure_logging, run_environment

configure_logging(context.config)
run_environment(context)  # type: ignore[arg-type]  # the module proxies an EnvironmentContext
