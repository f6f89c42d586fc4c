"""A store target, parsed once at the edge: the URL, the SQLite file (if any), whether it is
an in-memory database, whether it is opened for reading only, the PostgreSQL schema of its
own it lives in (if any). `Target.parse` is the one
place a path or URL string becomes these; everything inward (`Store.open`, the read-only
open, the CLI's messages) takes the parsed value and reads its fields instead of parsing the
target again."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from .dialects import backend_named, backend_of
from .errors import InvalidTargetError

SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""A schema name this package takes: a plain PostgreSQL identifier (lower case, as PostgreSQL
folds an unquoted one; at most 63 bytes), so it is never quoted and reads the same in SQL,
`search_path` and a URL."""


def url_of(target: str | os.PathLike[str] | URL | Target) -> URL:
    """A SQLAlchemy URL for a file path or a URL string (`…://…`): `postgresql://` means
    psycopg 3, `:memory:` an in-memory SQLite database, and any other string a file name,
    whatever characters it holds (it is built into the URL, never formatted: a file name may
    hold `?`, `#` or `%`, which a URL string parses)."""
    if isinstance(target, Target):
        return target.url
    if isinstance(target, URL):
        return target
    raw = os.fspath(target)
    if "://" in raw:
        url = _parsed(raw)
        if url.drivername == "postgresql":
            url = url.set(drivername="postgresql+psycopg")
        return url
    if raw == ":memory:":
        return URL.create("sqlite")
    return URL.create("sqlite", database=str(Path(raw).expanduser().absolute()))


def _parsed(raw: str) -> URL:
    """`raw` as a URL, or `InvalidTargetError` saying why without repeating it (a password)."""
    try:
        return make_url(raw)
    except ArgumentError:
        why = "SQLAlchemy cannot parse it"
    except ValueError:
        why = "its port is not a number"
    raise InvalidTargetError(f"the URL does not parse ({why})") from None


def sqlite_path(url: URL) -> Path | None:
    """The file behind a SQLite URL, or None for memory and for other backends."""
    if url.get_backend_name() != "sqlite" or backend_of(url).is_memory(url):
        return None
    return Path(str(url.database))


def safe_url(url: URL) -> str:
    """The URL as text with any password hidden, for messages and logs."""
    return url.render_as_string(hide_password=True)


def where(url: URL) -> str:
    """How messages name a store: its file, or its URL without the password (the one way;
    `Target.where` is this of the target's URL)."""
    path = sqlite_path(url)
    return str(path) if path is not None else safe_url(url)


@dataclass(frozen=True)
class Target:
    """A store target as parsed once (see the module docstring)."""

    url: URL
    path: Path | None
    """The SQLite file behind the URL; None for memory and for other backends."""
    memory: bool
    """Whether it is an in-memory SQLite database (nothing on disk)."""
    read_only: bool = False
    """Whether it is opened for reading only."""
    schema: str | None = None
    """The PostgreSQL schema of its own the store lives in (its URL's connections work in
    it, `with_own_schema`); None for the connection's own `search_path`."""

    @classmethod
    def parse(
        cls,
        target: str | os.PathLike[str] | URL | Target,
        *,
        read_only: bool | None = None,
        schema: str | None = None,
    ) -> Target:
        """`target` parsed (a `Target` is returned as it is; `read_only`, when given, is
        what it is opened for; `schema`, when given, the PostgreSQL schema of its own the
        store lives in, which its URL then carries). A backend this package has no dialect
        for raises `SchemaError`; a schema on SQLite, one that is no plain identifier, or one
        other than the target's own, `InvalidTargetError`."""
        if isinstance(target, Target):
            if schema is not None and schema != target.schema:
                moved = cls.parse(target.url, schema=schema)
                target = replace(target, url=moved.url, schema=moved.schema)
            if read_only is None or read_only == target.read_only:
                return target
            return replace(target, read_only=read_only)
        url = url_of(target)
        name = url.get_backend_name()
        backend = backend_named(name)
        memory = backend.is_memory(url)
        own = _own_schema(url, schema)
        if own is not None and own != backend.own_schema_of(url):
            url = backend.with_own_schema(url, own)
        return cls(url, sqlite_path(url), memory, bool(read_only), own)

    @property
    def where(self) -> str:
        """How messages name the store: its file, or its URL without the password."""
        return where(self.url)


def checked_schema(schema: str, backend: str) -> str:
    """`schema`, a schema of its own for a store of `backend` (a SQLAlchemy backend name), or
    `InvalidTargetError`: it is PostgreSQL's, and a plain identifier (`SCHEMA_NAME`)."""
    if backend != "postgresql":
        raise InvalidTargetError(
            f"a schema ({schema[:70]!r}) is PostgreSQL's: a {backend} store has none to live in; "
            "nothing was opened or created"
        )
    if not SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise InvalidTargetError(
            f"the schema name {schema[:70]!r} is not one this package takes: lower-case "
            "letters, digits and underscores, not starting with a digit or pg_, at most 63 "
            "characters; nothing was opened or created"
        )
    return schema


def _own_schema(url: URL, schema: str | None) -> str | None:
    """The schema of its own the store at `url` lives in: `schema`, or the one its URL
    already carries; checked (see `SCHEMA_NAME`), refused on SQLite and when the two differ."""
    carried = backend_of(url).own_schema_of(url)
    own = schema if schema is not None else carried
    if own is None:
        return None
    checked_schema(own, url.get_backend_name())
    if carried is not None and carried != own:
        raise InvalidTargetError(
            f"the store's URL already names the schema {carried!r}, not {own!r}; nothing was "
            "opened or created"
        )
    return own


TargetLike = str | os.PathLike[str] | URL | Target
"""What `Store.open` and the other openers take: a path, a URL string or URL, or a target
already parsed."""
