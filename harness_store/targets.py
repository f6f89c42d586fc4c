"""A store target, parsed once at the edge: the URL, the SQLite file (if any), whether it is
an in-memory database, whether it is opened for reading only. `Target.parse` is the one
place a path or URL string becomes these; everything inward (`Store.open`, the read-only
open, the CLI's messages) takes the parsed value and reads its fields instead of parsing the
target again."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from .dialects import backend_named
from .dialects.sqlite import is_memory
from .errors import InvalidTargetError


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
    if url.get_backend_name() != "sqlite" or is_memory(url):
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

    @classmethod
    def parse(
        cls, target: str | os.PathLike[str] | URL | Target, *, read_only: bool | None = None
    ) -> Target:
        """`target` parsed (a `Target` is returned as it is; `read_only`, when given, is
        what it is opened for). A backend this package has no dialect for raises
        `SchemaError`."""
        if isinstance(target, Target):
            if read_only is None or read_only == target.read_only:
                return target
            return replace(target, read_only=read_only)
        url = url_of(target)
        name = url.get_backend_name()
        backend_named(name)
        memory = name == "sqlite" and is_memory(url)
        return cls(url, sqlite_path(url), memory, bool(read_only))

    @property
    def where(self) -> str:
        """How messages name the store: its file, or its URL without the password."""
        return where(self.url)


TargetLike = str | os.PathLike[str] | URL | Target
"""What `Store.open` and the other openers take: a path, a URL string or URL, or a target
already parsed."""
