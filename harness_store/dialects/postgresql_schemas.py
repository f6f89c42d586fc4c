"""A PostgreSQL store in a schema of its own: the URL option that puts every connection in it,
and the schema created, worked in, and named in an offline script."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, text
from sqlalchemy.engine import URL

from ..errors import PrivilegeError, StoreError

SEARCH_PATH = "-csearch_path="
"""The libpq option that keeps a store in a schema of its own: every connection of its URL
starts with that schema as its whole `search_path`, so every statement (the Store's, the
upgrade's, `alembic_version`'s) lands in it unqualified, and the schema others use is never
seen."""


def url_options(url: URL) -> str:
    """The URL's libpq `options`, as one string."""
    options = url.query.get("options")
    return options if isinstance(options, str) else " ".join(options or ())


def with_own_schema(url: URL, schema: str) -> URL:
    """`url` whose connections work in `schema` (a name checked by the caller: a plain
    identifier, never quoted)."""
    return url.update_query_dict({"options": f"{url_options(url)} {SEARCH_PATH}{schema}".strip()})


def own_schema_of(url: URL) -> str | None:
    """The schema `with_own_schema` gave `url` (as written, unchecked), else None."""
    found = [o[len(SEARCH_PATH) :] for o in url_options(url).split() if o.startswith(SEARCH_PATH)]
    return found[-1] if found else None


def create_own_schema(
    conn: Connection, schema: str, translate_error: Callable[[BaseException], StoreError | None]
) -> bool:
    """Create `schema` (a checked name) unless it exists, by the connected role, which then
    owns it; whether it was created. Looked up first: `CREATE SCHEMA IF NOT EXISTS` needs
    the right to create schemas even when it has nothing to do. A role that may not create
    it gets the translation's `PrivilegeError` (`translate_error`: the backend's), saying
    what to grant."""
    exists = text("SELECT 1 FROM pg_namespace WHERE nspname = :name")
    if conn.execute(exists, {"name": schema}).first() is not None:
        return False
    try:
        conn.execute(text(f"CREATE SCHEMA IF NOT EXISTS {schema}"))
    except Exception as exc:
        refused = translate_error(exc)
        if not isinstance(refused, PrivilegeError):
            raise
        raise PrivilegeError(
            f"the store's schema {schema} does not exist, and this role may not create it: "
            f"grant it CREATE ON DATABASE {conn.engine.url.database} for the first upgrade, "
            f"or create the schema beforehand (CREATE SCHEMA {schema} AUTHORIZATION …); "
            "nothing was changed"
        ) from None
    return True


def work_in_own_schema(conn: Connection, schema: str) -> None:
    """Make `schema` (a checked name) the whole `search_path` of `conn`'s open transaction
    (`SET LOCAL`: it ends with the transaction): a connection handed over to the upgrade."""
    conn.execute(text("SELECT set_config('search_path', :schema, true)"), {"schema": schema})


def own_schema_script(schema: str) -> list[str]:
    """What an offline script (`upgrade --sql`) for a store in `schema` (a checked name) runs
    first, inside its transaction: the schema created unless it exists (looked up first, as
    online), then made the whole `search_path` of that transaction alone, whatever schema the
    session that applies the script works in."""
    return [
        f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = '{schema}') "
        f"THEN CREATE SCHEMA {schema}; END IF; END $$",
        f"SET LOCAL search_path TO {schema}",
    ]


def search_path(conn: Connection) -> str:
    """The `search_path` `conn` works with: the schema of its own a store's URL gave it,
    unless something on the way (a pooler) dropped the startup option."""
    return str(conn.execute(text("SELECT current_setting('search_path')")).scalar())


def database_exists(conn: Connection, name: str) -> bool:
    """Whether the server `conn` is connected to has a database called `name`."""
    named = text("SELECT 1 FROM pg_database WHERE datname = :name")
    return conn.execute(named, {"name": name}).first() is not None
