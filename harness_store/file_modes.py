"""The permission bits of the files a command writes beside a store: never wider than the
store's own (a private store's archive, export or lock file stays private), past the umask.

One place for every writer of files that hold or describe a store's rows: the Parquet export
(its files, directories, manifest and lock file) and the archive `prune --archive-to` creates.
A store without a file (PostgreSQL) gives private files (0600, directories 0700): its rows
are readable only with its credentials, so whatever is written of them starts private too.
"""

from __future__ import annotations

import os
import stat
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

PRIVATE_FILE = 0o600


@dataclass(frozen=True)
class FileModes:
    """The mode for new files (`file`) and directories (`directory`) written of one store, and
    the group to give them (the store's, where the user may)."""

    file: int
    group: int | None = None

    @classmethod
    def of(cls, store_file: Path | None) -> FileModes:
        """The modes of `store_file`'s companions: its read and write bits (never execute)
        and its group, the owner's own reading and writing always kept (a read-only store's
        export is still its owner's to replace); private when there is no file (or it
        cannot be read)."""
        found = None if store_file is None else cls.common([store_file])
        return found if found is not None else cls(PRIVATE_FILE)

    @classmethod
    def common(cls, store_files: list[Path]) -> FileModes | None:
        """The modes every one of `store_files` allows (a private one makes them private) and
        the first one's group, the owner's reading and writing always kept; None when none of
        them can be read."""
        infos = []
        for path in store_files:
            with suppress(OSError):
                infos.append(path.stat())
        if not infos:
            return None
        mode = 0o666
        for info in infos:
            mode &= stat.S_IMODE(info.st_mode)
        return cls(mode | PRIVATE_FILE, infos[0].st_gid)

    @property
    def directory(self) -> int:
        """A directory's mode: each class that may read a file may list and enter it too."""
        mode = self.file
        for read, search in ((stat.S_IRUSR, stat.S_IXUSR), (stat.S_IRGRP, stat.S_IXGRP),
                             (stat.S_IROTH, stat.S_IXOTH)):  # fmt: skip
            if mode & read:
                mode |= search
        return mode | stat.S_IRWXU  # the owner always keeps its way in

    def create_file(self, path: Path) -> None:
        """Create `path` empty with these modes (an existing file is truncated and narrowed to
        them, never widened); a writer that opens it afterwards keeps the mode."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, self.file)
        try:
            self._apply(fd, self.file)
        finally:
            os.close(fd)

    def create_new(self, path: Path) -> bool:
        """Create `path` empty with these modes if nothing is there; False when something is
        (or its directory is missing), which is left as it is."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, self.file)
        except OSError:
            return False
        try:
            self._apply(fd, self.file)
        finally:
            os.close(fd)
        return True

    def open_file(self, path: Path, flags: int) -> int:
        """`os.open(path, flags | O_CREAT)` with these modes when it creates the file; a file
        that was there keeps its own mode."""
        existed = path.exists()
        fd = os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, self.file)
        if not existed:
            try:
                self._apply(fd, self.file)
            except BaseException:
                os.close(fd)
                raise
        return fd

    def make_directories(self, path: Path) -> None:
        """`mkdir -p path`, each directory it creates with the directory mode; directories that
        exist keep theirs."""
        missing = []
        at = path
        while not at.exists():
            missing.append(at)
            if at.parent == at:
                break
            at = at.parent
        for directory in reversed(missing):
            with suppress(FileExistsError):  # made meanwhile by another writer: theirs stands
                directory.mkdir(self.directory)
                fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    self._apply(fd, self.directory)
                finally:
                    os.close(fd)

    def _apply(self, fd: int, mode: int) -> None:
        os.fchmod(fd, mode)  # past the umask
        if self.group is not None:
            with suppress(OSError):  # a group the user is not in cannot be given
                os.fchown(fd, -1, self.group)
