"""An application's PostgreSQL database that a store shares in a schema of its own: the
application's own table (`APP_TABLE`, in `public`), an engine holding it (`app_engine`) and
what a schema holds (`tables_in`)."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import Engine, text

from harness_store.engine import make_engine

APP_TABLE = "CREATE TABLE public.app_users (id SERIAL PRIMARY KEY, name TEXT NOT NULL)"
"""The application's own table, in the schema an application uses by default."""


def app_engine(pg_url: str) -> Iterator[Engine]:
    """A plain engine on the test's database (no schema of ours), holding the app's table;
    disposed at the end."""
    engine = make_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(text(APP_TABLE))
    try:
        yield engine
    finally:
        engine.dispose()


def tables_in(engine: Engine, schema: str) -> set[str]:
    """The names of the tables in `schema`."""
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = :s"), {"s": schema}
        )
        return {str(name) for name in rows.scalars()}
