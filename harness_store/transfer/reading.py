"""The source of a sync or copy: opened through the one read-only open, read in one snapshot
of its connector, checked for damage before a row is read.

The open (`store.open_read_only`, what `Store.open(read_only=True)` runs) checks the file,
refuses what cannot be read without an upgrade, and reads a still file with `immutable=1`
(`dialects.read_only_files`) so that nothing is left beside it. A writer that opens a source
while a snapshot reads it as still is noticed before what was read is trusted
(`WriterAppeared`), and the source is read again in a new snapshot, whose connection sees the
writer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from ..connector.translation import driver_message
from ..errors import MalformedStoreError, StoreError
from ..schema.preflight import is_malformed, malformed_message, quick_check
from ..targets import Target

if TYPE_CHECKING:
    from ..schema.detect import Diagnosis
    from ..store import Store


class WriterAppeared(Exception):
    """A writer opened a source read as a still file: its snapshot may be torn (read again)."""


def open_source(
    source: Target, action: str, *, refuse: bool, upgrade_command: str | None = None
) -> tuple[Store, Diagnosis]:
    """The read-only Store of a sync's or copy's source, and what it was found to be: the one
    read-only open, refusing a newer checkpoint format too (its rows could not be carried).
    With `refuse`, a store that cannot be read without an upgrade is refused there
    (`upgrade_command`: the command to name). A damaged file raises `MalformedStoreError`
    (`action`: what was not done with it, e.g. "synced")."""
    from ..store import Store, open_read_only

    try:
        return open_read_only(
            Store,
            source,
            refuse=refuse,
            refuse_newer_format=True,
            upgrade_command=upgrade_command,
        )
    except Exception as exc:
        cause = exc.__cause__ if isinstance(exc, StoreError) else exc
        if cause is not None and is_malformed(cause):
            detail = driver_message(cause)
            raise MalformedStoreError(
                malformed_source_message(source.where, detail, action)
            ) from None
        raise


def no_writer_on(store: Store, conn: Connection) -> Callable[[], None]:
    """What raises `WriterAppeared` once a writer has opened the file `conn` reads as still."""

    def check() -> None:
        if store.backend.still_read_outdated(conn):
            raise WriterAppeared(store.url.render_as_string(hide_password=True))

    return check


malformed_source_message = malformed_message
"""What a person reads about a damaged source (`preflight.malformed_message` with the action
not done with it, e.g. "synced")."""

check_source_pages = quick_check
"""`PRAGMA quick_check` on a source, before any of its rows is read: a damaged one raises
`MalformedStoreError` naming it (`preflight.quick_check` with the action not done)."""
