"""The connection a caller hands the migration environment (`config.attributes["connection"]`,
Alembic's cookbook), taken as it is given or refused.

A SQLAlchemy `Connection` or `Engine` is used as it is. Test harnesses hand over wrappers
(pytest-alembic's `WrappingConnection` holds a `Connection` in its `connection` attribute, and
others keep an `engine` or a `bind`): the object they hold is used. An `AsyncEngine` or
`AsyncConnection` is refused: its sync side works only inside `run_sync`, which hands over a
plain `Connection` (Alembic's asyncio recipe). Anything else stops the
command with `MigrationConnectionError` naming what was given; once a connection was handed
over, the environment never falls back to `-x db`, `$HARNESS_STORE_URL` or `./runs.sqlite3`,
which may name another database.
"""

from __future__ import annotations

import sys
from typing import Any

from sqlalchemy import Connection, Engine

from ..errors import MigrationConnectionError

HELD_IN = ("connection", "conn", "bind", "engine")
"""The attributes a wrapper is looked into, in this order (a `Connection` before an `Engine`,
so a wrapper that also forwards `engine` to its connection keeps its transaction)."""

DEPTH = 3
"""Wrappers of wrappers are unwrapped this deep."""


def describe(given: object) -> str:
    kind = type(given)
    return f"{kind.__module__}.{kind.__qualname__}"


def _is_async(given: object) -> bool:
    """Whether `given` is an `AsyncEngine` or `AsyncConnection`. Their module is looked up, not
    imported (it imports the ORM, which a no-op upgrade never loads): if it is not loaded, no
    such object exists."""
    module = sys.modules.get("sqlalchemy.ext.asyncio")
    if module is None:
        return False
    return isinstance(given, (module.AsyncConnection, module.AsyncEngine))


def _held(given: object, depth: int) -> Connection | Engine | None:
    if isinstance(given, (Connection, Engine)):
        return given
    if depth == 0 or isinstance(given, (str, bytes, int, float)) or _is_async(given):
        return None
    for name in HELD_IN:
        try:
            inner = getattr(given, name, None)
        except Exception:  # a property that fails is not a connection
            continue
        if inner is None or inner is given:
            continue
        found = _held(inner, depth - 1)
        if found is not None:
            return found
    return None


def given_connection(given: Any) -> Connection | Engine | None:
    """The `Connection` or `Engine` `given` is or holds; None when nothing was handed over
    (`given` is None); `MigrationConnectionError` for anything else."""
    if given is None:
        return None
    found = _held(given, DEPTH)
    if found is None:
        raise MigrationConnectionError(
            f"the Alembic config's `connection` attribute is a {describe(given)}, which neither "
            "is nor holds a SQLAlchemy Connection or Engine; nothing was migrated (a connection "
            "handed over is never replaced by -x db, $HARNESS_STORE_URL or ./runs.sqlite3)"
            + (
                "; hand over the sync connection `run_sync` gives (Alembic's asyncio recipe)"
                if _is_async(given)
                else ""
            )
        )
    return found
