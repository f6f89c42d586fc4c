"""New stores without walking the Alembic chain again: `NewStore` keeps one store just created
by `Store.open` per test process and copies it wherever a test needs a new, empty store
(`NEW_STORE`, and the `new_store` fixture of tests/conftest.py)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from contextlib import closing
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from harness_store import Store

from .pg_databases import PG_ENV, fresh_pg_database


class NewStore:
    """A store just created by `Store.open` and closed, built once per test process and
    copied for each test that only needs an empty store to work on.

    Creating a store walks the whole Alembic chain: about a second on SQLite and several on
    PostgreSQL here, paid by hundreds of tests. A copy is the same store: on SQLite the
    closed file itself (a closed WAL store has no side files), on PostgreSQL the
    `pg_dump` of the created database replayed into the test's empty one. Creation itself
    is tested where it is the subject (tests/test_migrations.py, the upgrade tests), through
    `store_target` and `pg_url`, which stay empty.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._sqlite: Path | None = None
        self._dumps: dict[str, str] = {}

    def place(self, target: str) -> None:
        """Put a new store at `target`: a SQLite path that does not exist yet, or the URL of
        an empty PostgreSQL database."""
        if "://" not in target:
            shutil.copyfile(self._sqlite_template(), target)
            return
        dump = self._pg_dump(os.environ[PG_ENV])
        if not dump:
            return  # no usable pg_dump: the test's `Store.open` creates the store itself
        engine = create_engine(target, poolclass=NullPool)
        try:
            raw = engine.raw_connection()
            try:
                with closing(raw.cursor()) as cursor:
                    cursor.execute(dump)
                raw.commit()
            finally:
                raw.close()
        finally:
            engine.dispose()

    def _sqlite_template(self) -> Path:
        if self._sqlite is None:
            path = self.directory / "new.sqlite3"
            Store.open(path).close()
            leftovers = [p.name for p in self.directory.iterdir() if p != path]
            assert not leftovers, f"a closed new store left {leftovers}"
            self._sqlite = path
        return self._sqlite

    def _pg_dump(self, server_url: str) -> str:
        """The SQL of a new store on this server, or "" when `pg_dump` is not installed or
        cannot dump it (older than the server)."""
        dump = self._dumps.get(server_url)
        if dump is None:
            dump = ""
            for url in fresh_pg_database(server_url):
                Store.open(url).close()
                libpq = make_url(url).set(drivername="postgresql")
                try:
                    done = subprocess.run(
                        ["pg_dump", "--no-owner", "--inserts", "-d",
                         libpq.render_as_string(hide_password=False)],
                        capture_output=True, text=True, check=True,
                    )  # fmt: skip
                except (OSError, subprocess.CalledProcessError):
                    continue
                # psql's own lines (pg_dump's `\\restrict` guard) are not SQL
                dump = "\n".join(
                    line for line in done.stdout.splitlines() if not line.startswith("\\")
                )
            self._dumps[server_url] = dump
        return dump


def _process_directory() -> Path:
    """A folder of this process's own for its new stores, removed when it exits."""
    directory = Path(tempfile.mkdtemp(prefix="hs-new-store-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


NEW_STORE = NewStore(_process_directory())
"""This process's `NewStore`: its folder is made at import, its stores on first use."""


def new_sqlite_store(path: Path) -> Path:
    """`path`, a new SQLite store there unless a file already is (a copy of `NEW_STORE`'s):
    what `Store.open(path)` leaves at a new path, without its cost, for helpers that write a
    store's rows and are not about its creation. The copy appears whole (renamed into place),
    as a created store does to a process watching the path (a follower)."""
    if not path.exists():
        part = path.with_name(f"{path.name}.new-store")
        NEW_STORE.place(str(part))
        os.replace(part, path)
    return path
