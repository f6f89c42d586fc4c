"""One export at a time per dataset directory: an exclusive `flock` on `DIR/_export.lock`,
beside the manifest, held for the whole export. The lock file stays (removing it would let a
third export lock a new file while the second still holds the old one); the lock itself goes
with the process that held it, whether it finished or was killed."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import DatasetBusyError
from ..file_modes import FileModes

LOCK = "_export.lock"


@contextmanager
def exclusive(root: Path, modes: FileModes) -> Iterator[None]:
    """Hold `root`'s export lock (created with `modes`), or `DatasetBusyError` at once when
    another export holds it."""
    path = root / LOCK
    descriptor = modes.open_file(path, os.O_RDWR)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DatasetBusyError(
                f"another export is writing to {root} (it holds {path}); "
                "run this one again when it has finished"
            ) from None
        yield
    finally:
        os.close(descriptor)
