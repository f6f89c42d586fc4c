"""The copy of a SQLite store taken before its revision changes.

The copy is read through a second, read-only connection with SQLite's online backup API while
the upgrading connection holds the write lock, so it is exactly the state the upgrade starts
from. It is written as `….bak.partial` with the store's own file mode (a private store gets a
private backup), synced, renamed to its final name, and the directory synced: only a whole,
durable copy ever carries a backup's name.
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime
from pathlib import Path

from ..dialects.read_only_files import JOURNAL_SUFFIX, beside
from ..dialects.sqlite_files import backup_copy
from ..errors import UpgradeFailedError
from .preflight import is_disk_full


def backup_name(path: Path, label: str, when: datetime | None = None) -> Path:
    """`<store>.<revision>-<UTC time>.bak` beside the store (revision `base` when none)."""
    stamp = (when or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S%fZ")
    return path.with_name(f"{path.name}.{label}-{stamp}.bak")


def take_backup(path: Path, label: str) -> Path:
    """Copy the store at `path` to a new backup file and return its path: beside the file
    itself, named after it, when `path` is a symbolic link (a link's folder may be another
    volume, or one nobody looks in for the store's backups).

    A failure (a full disk, most often) removes the partial copy and raises
    `UpgradeFailedError` with stage "backup"; the store itself is never written here.
    """
    destination = backup_name(path.resolve(), label)
    partial = destination.with_name(destination.name + ".partial")
    try:
        _copy(path, partial)
        os.replace(partial, destination)
        _sync_directory(destination.parent)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
        with contextlib.suppress(FileNotFoundError):
            beside(partial, JOURNAL_SUFFIX).unlink()
        if isinstance(exc, Exception) and (is_disk_full(exc) or isinstance(exc, OSError)):
            raise UpgradeFailedError(
                f"{path}: the upgrade failed while writing the backup {destination.name} "
                f"({failure_reason(exc)}); the store is unchanged and no backup was left",
                stage="backup",
                unchanged=True,
            ) from exc
        raise
    return destination


def _copy(path: Path, partial: Path) -> None:
    info = path.stat()
    fd = os.open(partial, os.O_CREAT | os.O_EXCL | os.O_WRONLY, info.st_mode & 0o777)
    try:
        os.fchmod(fd, info.st_mode & 0o777)  # exactly the store's mode, whatever the umask
        if os.geteuid() == 0:
            with contextlib.suppress(OSError):
                os.fchown(fd, info.st_uid, info.st_gid)
    finally:
        os.close(fd)
    backup_copy(path, partial)
    fd = os.open(partial, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def failure_reason(exc: BaseException) -> str:
    """Why a write failed, in a few words and one line: "the disk is full" for a full disk,
    a quota or a size limit (a driver's message spans lines with its SQL)."""
    if is_disk_full(exc):
        return "the disk is full"
    return str(exc) or type(exc).__name__


def discard(backup: Path | None) -> None:
    """Remove a backup whose upgrade did not happen (the store is still what it holds)."""
    if backup is not None:
        with contextlib.suppress(FileNotFoundError):
            backup.unlink()
        _sync_directory(backup.parent)
