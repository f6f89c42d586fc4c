"""Opening a store for the read commands: parse the target, open it through the one
read-only open (`store.open_read_only`, what `Store.open(read_only=True)` runs), refuse what
cannot be read (`detect.refuse_unreadable`) with a command to paste.

The Store (and with it the models and the ORM) is imported only when a read command opens
one: `harness-store upgrade` looks at the store through a bare engine (`look`).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SchemaError, UnfinishedTransactionError
from ..lazy import collector_paused
from .app import EXIT_NOT_A_STORE, EXIT_USAGE, CliError

if TYPE_CHECKING:
    from sqlalchemy import Connection
    from sqlalchemy.engine import URL

    from ..schema.detect import Diagnosis
    from ..store import Store
    from ..targets import Target

# --- opening a store read-only -----------------------------------------------------------


def parse_target(db: str, *, read_only: bool = False, schema: str | None = None) -> Target:
    """A path or URL argument parsed, once (`Target.parse`), with the PostgreSQL schema of
    its own `--schema` names; an unusable URL or schema is a usage error. What is opened
    later takes this value as it is."""
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    from ..targets import Target

    refuse_hidden_at(db)
    try:
        target = Target.parse(db, read_only=read_only, schema=schema)
    except (ArgumentError, NoSuchModuleError, ValueError, SchemaError) as exc:
        raise CliError(
            EXIT_USAGE, f"{shown(db)} is not a usable store path or URL: {exc}"
        ) from None
    if read_only and target.memory:
        raise CliError(EXIT_USAGE, "an in-memory SQLite database holds no store; give a file")
    return target


def in_schema(db: str, schema: str | None) -> str:
    """`db` with `--schema` in it (checked, or a usage error): the URL of its target, from
    which every later parse of the argument reads the schema back; `db` itself without one."""
    if schema is None:
        return db
    return parse_target(db, schema=schema).url.render_as_string(hide_password=False)


def command_target(url: URL) -> str:
    """How a suggested command names the store, ready to paste into a shell: a path or URL
    quoted for the shell, or `"$HARNESS_STORE_URL"` for a URL with a password (which is never
    printed, and a `***` in its place would not run)."""
    from ..engine import URL_ENV, safe_url, sqlite_path

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
    from ..engine import URL_ENV, sqlite_path

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
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from ..targets import safe_url

    try:
        return repr(safe_url(make_url(db)))
    except (ArgumentError, ValueError):
        return "the URL given" if "@" in db else repr(db)


def unfinished_transaction_error(path: Path, url: URL) -> CliError:
    """What the command says, instead of SQLite's "attempt to write a readonly database",
    of a store left with an unfinished transaction by a crash (`preflight.check_readable`)."""
    return CliError(
        EXIT_NOT_A_STORE,
        f"{path} has an unfinished transaction (its -journal file was left by a crash); "
        f"reading it needs that rolled back first: run {suggest('upgrade', url)} or open "
        "it with anything that writes (nothing was changed)",
    )


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


@dataclass
class Reader:
    """A store opened read-only, with what it was found to be."""

    store: Store
    url: URL
    found: Diagnosis
    replaced: Replaced = field(default_factory=Replaced)

    @property
    def where(self) -> str:
        from ..engine import where

        return where(self.url)

    def connection(self) -> AbstractContextManager[Connection]:
        """One read transaction on the Store's own connection, for the commands' listings."""
        from ..store import read_snapshot

        return read_snapshot(self.store)


def diagnosed(conn: Connection, url: URL, *, shape: bool = True) -> Diagnosis:
    """What the store on `conn` is; an unfinished copy is refused."""
    from ..engine import where
    from ..schema.copy_marker import refuse_unfinished_copy
    from ..schema.detect import diagnose

    found = diagnose(conn, shape=shape)
    refuse_unfinished_copy(conn, where(url))
    return found


def look(db: str, *, schema: str | None = None) -> Diagnosis:
    """What the store at `db` is, read through a bare read-only engine (the dialect reads a
    still file `immutable=1`, as the read-only open does), without the Store: all `upgrade`
    needs to say what it found, and it may be older than the Store reads."""
    from ..connector import connector_at
    from ..dialects.read_only_files import names_uri
    from ..engine import read_only_url
    from ..schema.detect import check_sqlite_file
    from ..schema.preflight import check_readable

    target = parse_target(db, read_only=True, schema=schema)
    url, path = target.url, target.path
    if path is not None and not names_uri(url):
        check_sqlite_file(path, writable=False, missing="")
        try:
            check_readable(path)
        except UnfinishedTransactionError:
            raise unfinished_transaction_error(path, url) from None
    with connector_at(read_only_url(url)) as connector, connector.read() as conn:
        return diagnosed(conn, url, shape=False)


@contextmanager
def open_reader(
    db: str,
    *,
    require_readable: bool = True,
    shape: bool = False,
    replace: bool = True,
    schema: str | None = None,
) -> Iterator[Reader]:
    """Open `db` through the one read-only open (`Store.open(read_only=True)`'s) and
    diagnose it; refuse what cannot be read (see the exit codes). `shape`: read every table's
    columns of a tracked store too (`inspect` shows them). Text that is not UTF-8 is shown
    with U+FFFD for its bytes, and how many values were is said at the end; `replace=False`:
    it is not shown replaced (an export, which must write it exactly or refuse it).
    `schema`: the PostgreSQL schema of its own the store lives in (`--schema`)."""
    from .app import OWN_PROCESS  # read now: `main` sets it before any command runs

    with collector_paused(freeze=OWN_PROCESS):
        from ..store import Store, open_read_only

    target = parse_target(db, read_only=True, schema=schema)
    replaced = Replaced()
    try:
        store, found = open_read_only(
            Store,
            target,
            refuse=False,
            shape=shape,
            refuse_newer_format=True,  # the command names a newer format instead of reading it
            text_factory=replaced if replace else None,
        )
    except UnfinishedTransactionError:
        assert target.path is not None  # only a SQLite file has a rollback journal
        raise unfinished_transaction_error(target.path, target.url) from None
    with store:
        reader = Reader(store, target.url, found, replaced)
        if require_readable:
            refuse_unreadable(reader)
        yield reader
    if replaced.count:  # every read command says it, once, after what it showed
        from .output import note, plural

        note(
            f"{plural(replaced.count, 'value')} held bytes that are not UTF-8; "
            "they are shown replaced by U+FFFD (\ufffd)"
        )


def refuse_unreadable(reader: Reader) -> None:
    """Raise for a store the read commands cannot read without an upgrade."""
    from ..schema.detect import refuse_unreadable as refuse_unreadable_store

    refuse_unreadable_store(reader.found, reader.where, suggest("upgrade", reader.url))
