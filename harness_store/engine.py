"""Engines for run stores: a path or URL in, an engine set up the backend's way out."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import URL

from .dialects import backend_named
from .errors import MissingDriverError
from .targets import TargetLike, url_of
from .targets import safe_url as safe_url  # where a store's name is shown: `targets`
from .targets import sqlite_path as sqlite_path
from .targets import where as where

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

DEFAULT_URL = "sqlite:///runs.sqlite3"
"""Where a store lives when nobody says otherwise: `runs.sqlite3` in the working directory."""

URL_ENV = "HARNESS_STORE_URL"
"""Environment variable naming the store when no `-x db=` / argument is given."""

DRIVER_EXTRAS = {"psycopg": "postgresql", "psycopg_binary": "postgresql"}
"""Driver modules this package's extras install, and the extra that does."""


@contextmanager
def _drivers_named() -> Iterator[None]:
    """A driver the URL needs and this installation lacks, as `MissingDriverError` naming
    the extra that installs it (SQLAlchemy imports it when the engine is made)."""
    try:
        yield
    except ModuleNotFoundError as exc:
        root = (exc.name or "").split(".")[0]
        if root not in DRIVER_EXTRAS:
            raise
        raise MissingDriverError(root, DRIVER_EXTRAS[root]) from None


def to_url(target: TargetLike) -> URL:
    """A SQLAlchemy URL for a file path or a URL string (`…://…`), a URL, or a parsed
    target (see `targets.url_of`)."""
    return url_of(target)


def resolve_target(explicit: str | None) -> URL:
    """`explicit`, else `$HARNESS_STORE_URL`, else `sqlite:///runs.sqlite3`."""
    return to_url(explicit or os.environ.get(URL_ENV) or DEFAULT_URL)


def make_engine(
    target: TargetLike,
    *,
    synchronous: str | None = None,
    busy_timeout: float | None = None,
) -> Engine:
    """An engine for the store at `target`, with the backend's pool, pragmas and hooks."""
    url = to_url(target)
    backend = backend_named(url.get_backend_name())
    options = backend.engine_options(url, synchronous=synchronous, busy_timeout=busy_timeout)
    with _drivers_named():
        engine = create_engine(url, **options)
    backend.install(engine, synchronous=synchronous, busy_timeout=busy_timeout)
    return engine


def make_async_engine(
    target: TargetLike,
    *,
    synchronous: str | None = None,
    busy_timeout: float | None = None,
) -> AsyncEngine:
    """An asyncio engine for the store at `target` (a backend whose driver is natively
    async), with the same pool and hooks as `make_engine`'s; its `sync_engine` is what a
    Store runs on inside a call's greenlet (`aio.greenlets`). Loads `sqlalchemy.ext.asyncio`
    only when called."""
    from sqlalchemy.ext.asyncio import create_async_engine

    url = to_url(target)
    backend = backend_named(url.get_backend_name())
    options = backend.async_engine_options(url, synchronous=synchronous, busy_timeout=busy_timeout)
    with _drivers_named():
        engine = create_async_engine(url, **options)
    backend.install_async(engine.sync_engine, synchronous=synchronous, busy_timeout=busy_timeout)
    return engine


def read_only_url(target: TargetLike) -> URL:
    """The store at `target`, as a URL through which no statement can write."""
    url = to_url(target)
    return backend_named(url.get_backend_name()).read_only_url(url)
