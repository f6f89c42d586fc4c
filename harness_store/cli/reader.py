"""Opening a store for the read commands: parse the target once, diagnose, refuse.

The Store (and with it the models and the ORM) is imported only when a read command opens
one: `harness-store upgrade` looks at the store through a bare engine (`look`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sqlalchemy import Connection, Engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from ..detect import Diagnosis, check_sqlite_file, diagnose
from ..detect import refuse_unreadable as refuse_unreadable_store
from ..dialects import backend_named
from ..engine import URL_ENV, make_engine, safe_url, sqlite_path, to_url, where
from ..engine import read_only_url as engine_read_only_url
from ..errors import (
    SchemaError,
    StoreNotFoundError,
)
from ..transfer.marker import IncompleteCopyError, copy_in_progress, incomplete_copy_message

if TYPE_CHECKING:
    from ..store import Store
from .app import EXIT_NOT_A_STORE, EXIT_USAGE, CliError

# --- opening a store read-only -----------------------------------------------------------


def parse_target(db: str) -> URL:
    """The URL for a path or URL argument; an unusable URL is a usage error."""
    refuse_hidden_at(db)
    try:
        url = to_url(db)
        backend_named(url.get_backend_name())
    except (ArgumentError, NoSuchModuleError, ValueError, SchemaError) as exc:
        raise CliError(
            EXIT_USAGE, f"{shown(db)} is not a usable store path or URL: {exc}"
        ) from None
    return url


def command_target(url: URL) -> str:
    """How a suggested command names the store, ready to paste into a shell: a path or URL
    quoted for the shell, or `"$HARNESS_STORE_URL"` for a URL with a password (which is never
    printed, and a `***` in its place would not run)."""
    path = sqlite_path(url)
    if path is not None:
        return shlex.quote(str(path))
    if url.password:
        return f'"${URL_ENV}"'
    return shlex.quote(safe_url(url))


def suggest(command: str, url: URL, then: str = "", *, options: str = "") -> str:
    """A command for the person to run on this store (with `options` after the store), in
    backquotes, pasteable as it is, then `then`, then where the URL goes when the command
    names it by `$HARNESS_STORE_URL`."""
    tail = f" {options}" if options else ""
    text = f"`harness-store {command} {command_target(url)}{tail}`{then}"
    if sqlite_path(url) is None and url.password:
        text += f", with {URL_ENV} set to the store's URL (its password is not shown here)"
    return text


def refuse_hidden_at(db: str) -> None:
    """Refuse a URL whose user or password holds a raw `@`: SQLAlchemy would take the text
    after it for the host, and the driver's "cannot resolve host" would print a piece of the
    password. The URL is not repeated."""
    _, sep, rest = db.partition("://")
    if not sep:
        return
    authority = rest.split("/", 1)[0]
    if authority.count("@") > 1:
        raise CliError(
            EXIT_USAGE,
            "the URL's user name or password holds an '@'; write it as %40 "
            "(the URL is not shown: it holds a password)",
        )


def shown(db: str) -> str:
    """An argument as messages may print it: a URL's password hidden, even in a bad URL."""
    if "://" not in db:
        return repr(db)
    try:
        return repr(make_url(db).render_as_string(hide_password=True))
    except (ArgumentError, ValueError):
        return "the URL given" if "@" in db else repr(db)


def check_file(path: Path) -> None:
    """Refuse a path that is no SQLite store before SQLite opens it; a read-only file is fine."""
    if not path.exists():
        raise StoreNotFoundError(f"no run store at {path}")
    check_sqlite_file(path, writable=False)


def hot_journal(path: Path) -> bool:
    """Whether a rollback journal beside `path` holds an unfinished transaction (SQLite calls
    it "hot"): only a connection that can write rolls it back, so a read-only one fails."""
    journal = path.with_name(path.name + "-journal")
    try:
        with journal.open("rb") as handle:
            return any(handle.read(28))
    except OSError:
        return False


def refuse_hot_journal(path: Path, url: URL) -> None:
    """Explain, instead of SQLite's "attempt to write a readonly database", a store left with
    an unfinished transaction by a crash."""
    if hot_journal(path):
        raise CliError(
            EXIT_NOT_A_STORE,
            f"{path} has an unfinished transaction (its -journal file was left by a crash); "
            f"reading it needs that rolled back first: run {suggest('upgrade', url)} or open "
            "it with anything that writes (nothing was changed)",
        )


def in_wal_mode(path: Path) -> bool:
    """Whether the file's header says WAL (read and write versions 2)."""
    with path.open("rb") as handle:
        header = handle.read(20)
    return header[18:20] == b"\x02\x02"


def read_as_still_file(path: Path) -> bool:
    """Whether to read a WAL store with `immutable=1`, as a file nothing changes.

    When it has no `-wal`/`-shm` beside it, no connection has it open (a connection keeps them
    while it is open), and a read-only open would create them and could not remove them; on
    read-only media (a mounted backup) nothing can write it, and SQLite cannot create its
    `-shm` there at all. A store in rollback-journal mode creates no side files when read."""
    if not in_wal_mode(path):
        return False
    side = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    if not any(p.exists() for p in side):
        return True
    return not os.access(path.parent, os.W_OK)


def immutable_url(url: URL, path: Path) -> URL:
    """The store as a `file:` URI with `immutable=1` (the read-only open adds `mode=ro`)."""
    uri = "file:" + quote(str(path.absolute()), safe="/")
    return URL.create(url.drivername, database=uri, query={"immutable": "1", "uri": "true"})


def read_only_url(url: URL) -> URL:
    """The same store, opened so that no statement can write to it."""
    try:
        return engine_read_only_url(url)
    except ValueError as exc:
        raise CliError(
            EXIT_USAGE, "an in-memory SQLite database holds no store; give a file"
        ) from exc


def sqlite_uri(url: URL) -> bool:
    """Whether a SQLite URL already names its file as a `file:` URI (`?uri=true`)."""
    return str(url.query.get("uri", "")).lower() in ("true", "1")


class Replaced:
    """A SQLite `text_factory` that decodes bytes that are not UTF-8 with U+FFFD instead of
    failing the whole read, and counts how often it had to."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, raw: bytes) -> str:
        try:
            return raw.decode()
        except UnicodeDecodeError:
            self.count += 1
            return raw.decode("utf-8", "replace")

    def install(self, engine: Engine) -> None:
        """Use it on every connection `engine` opens from now on (SQLite only)."""
        if engine.dialect.name != "sqlite":
            return

        @event.listens_for(engine, "connect")
        def lenient(dbapi_conn: Any, record: Any) -> None:
            dbapi_conn.text_factory = self


@dataclass
class Reader:
    """A store opened read-only, with what it was found to be."""

    store: Store
    url: URL
    found: Diagnosis
    replaced: Replaced = field(default_factory=Replaced)

    @property
    def where(self) -> str:
        return where(self.url)

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A connection inside one read transaction."""
        with self.store.engine.connect() as conn, conn.begin():
            yield conn


def reading_url(db: str) -> tuple[URL, URL]:
    """`db` as given, and as a read opens it (read-only; `immutable=1` for a still WAL file),
    after refusing a path that is no store or has an unfinished transaction."""
    url = parse_target(db)
    path = sqlite_path(url)
    opened = url
    if path is not None and not sqlite_uri(url):
        check_file(path)
        refuse_hot_journal(path, url)
        if read_as_still_file(path):
            opened = immutable_url(url, path)
    return url, read_only_url(opened)


def diagnosed(conn: Connection, url: URL, *, shape: bool = True) -> Diagnosis:
    """What the store on `conn` is; an unfinished copy is refused."""
    found = diagnose(conn, shape=shape)
    if copy_in_progress(conn):
        raise IncompleteCopyError(incomplete_copy_message(where(url)))
    return found


def look(db: str) -> Diagnosis:
    """What the store at `db` is, read as the read commands read it but through a bare
    engine, without the Store: all `upgrade` needs to say what it found."""
    url, opened = reading_url(db)
    engine = make_engine(opened)
    try:
        with engine.connect() as conn, conn.begin():
            return diagnosed(conn, url, shape=False)
    finally:
        engine.dispose()


@contextmanager
def open_reader(db: str, *, require_readable: bool = True, shape: bool = False) -> Iterator[Reader]:
    """Open `db` read-only and diagnose it; refuse what cannot be read (see the exit codes).
    `shape`: read every table's columns of a tracked store too (`inspect` shows them)."""
    from ..store import Store

    url, opened = reading_url(db)
    store = Store(opened)
    try:
        with store.engine.connect() as conn, conn.begin():
            reader = Reader(store, url, diagnosed(conn, url, shape=shape))
        reader.replaced.install(store.engine)
        if require_readable:
            refuse_unreadable(reader)
        yield reader
    finally:
        store.close()


def refuse_unreadable(reader: Reader) -> None:
    """Raise for a store the read commands cannot read without an upgrade."""
    refuse_unreadable_store(reader.found, reader.where, suggest("upgrade", reader.url))
