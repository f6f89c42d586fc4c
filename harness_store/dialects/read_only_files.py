"""Reading a SQLite file read-only without leaving side files, and without missing a writer.

A read-only connection (`mode=ro`) to a WAL store makes SQLite create the store's `-wal` and
`-shm` when they are not there, and it cannot remove them when it closes; on read-only media
it cannot create them at all, and the open fails. A WAL store with no side files has no
connection open on it (every connection keeps them while it is open): such a "still file" is
read with `immutable=1` (SQLite then takes no locks and needs no side files). That is only
safe while nobody writes the file, so a connection opened that way is marked (`STILL_FILE`
in its pool entry's `info`), and before each read the connector asks `still_read_outdated`:
once a writer has opened the store (its side files appeared in a writable directory), the
connection is replaced by a plain `mode=ro` one, which sees the writer's commits.

Every other read-only open is plain `mode=ro`: a store in rollback-journal mode creates no
side files when read, and a store with side files may have a live writer whose commits a
reader must see, or (a copy of a live store, on read-only media too) commits still in its
`-wal`, which `immutable=1` would not read.

A snapshot that cannot be replaced mid-read (sync's and copy's reads of a source, in one
`Connector.snapshot`) asks `still_read_outdated` of its connection before it trusts what it
read, and is read again in a new snapshot when it says so.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from sqlalchemy import Connection, Engine, event
from sqlalchemy.engine import URL

WAL_SUFFIX = "-wal"
SHM_SUFFIX = "-shm"
SIDE_SUFFIXES = (WAL_SUFFIX, SHM_SUFFIX)
"""The files SQLite keeps beside a WAL store while a connection has it open."""

JOURNAL_SUFFIX = "-journal"
"""The rollback journal SQLite keeps beside a store in its pre-WAL modes, while it writes."""


def beside(path: Path, suffix: str) -> Path:
    """The side file `suffix` names beside the store at `path` (`<store>-wal`, …)."""
    return path.with_name(path.name + suffix)


STILL_FILE = "hs_still_file"
"""Pool-entry `info` key: the path of the file this connection reads with `immutable=1`, and
its `FileMark` when the connection was opened."""

FileMark = tuple[int, int, int, int]
"""A file's device, inode, size and modification time: a writer that came and went (its side
files gone again) still leaves the file changed."""


def file_mark(path: Path) -> FileMark | None:
    """The `FileMark` of the file at `path` now, or None when it cannot be read."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def side_files(path: Path) -> list[Path]:
    """The `-wal` and `-shm` files SQLite keeps beside a WAL store while it is open."""
    return [beside(path, suffix) for suffix in SIDE_SUFFIXES]


def in_wal_mode(path: Path) -> bool:
    """Whether the file's header says WAL (read and write versions 2)."""
    with path.open("rb") as handle:
        header = handle.read(20)
    return header[18:20] == b"\x02\x02"


def read_as_still_file(path: Path) -> bool:
    """Whether to read the store at `path` with `immutable=1` (see the module docstring)."""
    try:
        if not in_wal_mode(path):
            return False
    except OSError:
        return False  # not ours to explain: the open reports it
    return not any(p.exists() for p in side_files(path))


def writer_appeared(path: Path, since: FileMark | None) -> bool:
    """Whether a writer opened the store while it was read as a still file: its side files
    are there now, or the file is not the one marked `since` (a writer that committed and
    closed in between). On read-only media nothing can write it."""
    if not os.access(path.parent, os.W_OK):
        return False
    if any(p.exists() for p in side_files(path)):
        return True
    return since is not None and file_mark(path) != since


def file_uri(path: Path) -> str:
    """`path` as a SQLite `file:` URI (no query)."""
    return "file:" + quote(str(path.absolute()), safe="/")


def names_uri(url: URL) -> bool:
    """Whether a SQLite URL names its file as a `file:` URI already (`?uri=true`): it is
    opened as given, its query deciding."""
    return str(url.query.get("uri", "")).lower() in ("true", "1")


def read_only_path(url: URL) -> Path | None:
    """The file a read-only `file:` URL (`mode=ro`, as `read_only_url` makes) names, else
    None (a writable URL, a URI already `immutable`, or one that is no file)."""
    database = str(url.database or "")
    if url.query.get("mode") != "ro" or "immutable" in url.query:
        return None
    if not database.startswith("file:"):
        return None
    return Path(unquote(database.removeprefix("file:").split("?", 1)[0]))


def install_still_reads(engine: Engine) -> None:
    """Open each connection of a read-only engine `immutable=1` when its file is still at
    that moment, and mark it so (see the module docstring)."""
    path = read_only_path(engine.url)
    if path is None:
        return

    @event.listens_for(engine, "do_connect")
    def still_when_nobody_writes(dialect: Any, record: Any, cargs: list[Any], cparams: Any) -> None:
        record.info.pop(STILL_FILE, None)
        mark = file_mark(path)
        if cargs and isinstance(cargs[0], str) and read_as_still_file(path):
            cargs[0] = f"{cargs[0]}{'&' if '?' in cargs[0] else '?'}immutable=1"
            record.info[STILL_FILE] = (path, mark)


def still_read_outdated(conn: Connection) -> bool:
    """Whether `conn` reads its file as still while a writer has since opened it."""
    still = conn.info.get(STILL_FILE)
    if still is None:
        return False
    path, mark = still
    return writer_appeared(path, mark)
