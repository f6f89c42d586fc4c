"""Noticing a source's commits without opening it: its `SourceMark`.

A follower asks each source, many times a second, whether anything was committed since its
last pass. Asking must cost next to nothing, hold no lock, create no side file and keep no
connection open (a connection held on a WAL store keeps its `-wal` and `-shm` after io-harness
closes it, which a read-only connection cannot remove: see `dialects.read_only_files`). So
the question is answered from the files alone, by a mark that changes with every commit:

- the store file's device, inode, size and modification time, and its header's file change
  counter (bytes 24–27, which every commit in rollback-journal mode increments): a commit in
  rollback-journal mode, a checkpoint, a file replaced, deleted or put back;
- in WAL mode, the `-wal` file's size and modification time, and the first copy of the
  wal-index header at the start of the `-shm` (48 bytes), whose change counter every WAL
  commit increments: two commits within one tick of the filesystem's clock into a WAL that
  was restarted at the same length still differ there.

This is what `PRAGMA data_version` reports to a held connection, read without holding one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..dialects.read_only_files import SHM_SUFFIX, WAL_SUFFIX, beside

HEADER_COUNTER = slice(24, 28)
"""The file change counter in a SQLite database header."""

WAL_INDEX_HEADER = 48
"""Bytes of the first wal-index header copy at the start of a `-shm` file."""


@dataclass(frozen=True)
class SourceMark:
    """What a source's files look like now; any change means a commit (or a new file)."""

    file: tuple[int, int, int, int]
    """Device, inode, size and modification time (ns) of the store file."""
    counter: bytes
    wal: tuple[int, int] | None
    """Size and modification time (ns) of the `-wal`, when there is one."""
    wal_index: bytes | None

    @property
    def identity(self) -> tuple[int, int]:
        """Device and inode: a new file at the path has another."""
        return self.file[0], self.file[1]

    @property
    def committed_ns(self) -> int:
        """When the newest commit it shows was written (wall clock, ns): the later of the
        store file's and its `-wal`'s modification times."""
        return max(self.file[3], self.wal[1] if self.wal is not None else 0)


def _read(path: Path, size: int) -> bytes | None:
    try:
        with path.open("rb", buffering=0) as handle:
            return handle.read(size)
    except OSError:
        return None


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None


def source_mark(path: Path) -> SourceMark | None:
    """The source's mark now, or None when no regular file is at `path` (not there yet,
    deleted, or being replaced)."""
    info = _stat(path)
    if info is None or not os.path.isfile(path):
        return None
    header = _read(path, 100) or b""
    wal_path = beside(path, WAL_SUFFIX)
    wal = _stat(wal_path)
    index = _read(beside(path, SHM_SUFFIX), WAL_INDEX_HEADER) if wal else None
    return SourceMark(
        file=(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns),
        counter=header[HEADER_COUNTER],
        wal=(wal.st_size, wal.st_mtime_ns) if wal is not None else None,
        wal_index=index,
    )
