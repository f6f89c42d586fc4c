"""The target of a copy: refused unless empty, emptied again after a failed copy, recounted
after the commit. A target a killed copy left (see `marker`) is emptied by `replace` and copied
into afresh: its rows were never committed, so there is nothing to continue from."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import MetaData, inspect
from sqlalchemy.engine import URL

from ..dialects import backend_named
from ..dialects.read_only_files import JOURNAL_SUFFIX, SIDE_SUFFIXES, beside
from ..engine import sqlite_path, where
from ..file_modes import FileModes
from ..schema.copy_marker import COPY_MARKER, IncompleteCopyError, incomplete_copy_message
from ..schema.detect import check_sqlite_file
from .plan import BOOKKEEPING_TABLES, Plan, count, opened
from .report import TargetNotEmptyError
from .tables import compare

SQLITE_SIDE_FILES = (*SIDE_SUFFIXES, JOURNAL_SUFFIX)


@dataclass(frozen=True)
class TargetBefore:
    """What the target was before the copy, so a failed copy can put it back."""

    file_existed: bool
    checkpoint_format: int


def check_target_empty(url: URL, *, replace: bool = False) -> TargetBefore:
    """Refuse a target with tables or views (but the chain's own typed-times views); say
    whether a SQLite file was there already.

    With `replace`, a target left by an interrupted copy, or whose tables hold no rows, is
    emptied first instead."""
    path = sqlite_path(url)
    if path is not None:
        if not path.exists():
            return TargetBefore(file_existed=False, checkpoint_format=0)
        check_sqlite_file(path)
    with opened(url) as target, target.read() as conn:
        inspector = inspect(conn)
        backend = backend_named(conn.dialect.name)
        views = sorted(set(inspector.get_view_names()) - backend.typed_times_views())
        names = sorted(inspector.get_table_names()) + views  # the chain's own views: no rows
        fmt = backend.checkpoint_format(conn)
        unfinished = COPY_MARKER in names
        rowless = not views and all(
            count(conn, name) == 0 for name in names if name not in BOOKKEEPING_TABLES
        )
    if names and not unfinished and rowless and not replace:
        # a schema without rows (what `harness-store upgrade URL` builds): nothing to lose
        replace = True
    if names and replace and (unfinished or rowless):
        empty_again(url, TargetBefore(file_existed=True, checkpoint_format=0))
        return TargetBefore(file_existed=path is not None, checkpoint_format=0)
    if unfinished:
        raise IncompleteCopyError(incomplete_copy_message(where(url)))
    if names:
        shown = ", ".join(names[:8]) + (" …" if len(names) > 8 else "")
        raise TargetNotEmptyError(
            f"{where(url)} is not empty (it has {shown}, with rows); a copy only goes into a "
            "database without rows, so nothing was changed. Drop its tables or choose "
            "another target (--replace redoes only a copy that was killed)"
        )
    return TargetBefore(file_existed=path is not None, checkpoint_format=fmt)


def verify_committed(plan: Plan, url: URL) -> None:
    """Count the target again on a fresh connection, as other clients will see it."""
    with opened(url) as target, target.read() as conn:
        got = {t.name: count(conn, t.name) for t in plan.tables}
    compare(plan.counts, got, " after the commit (the copy was committed and left in place)")


def empty_again(url: URL, before: TargetBefore) -> None:
    """Put a target whose copy failed back as it was: no tables (or no file at all)."""
    path = sqlite_path(url)
    if path is not None and not before.file_existed:
        for candidate in (path, *(beside(path, suffix) for suffix in SQLITE_SIDE_FILES)):
            with suppress(FileNotFoundError):
                candidate.unlink()
        return
    if path is not None and not path.exists():
        return
    with opened(url) as target, target.write() as conn:
        backend = backend_named(conn.dialect.name)
        backend.set_checkpoint_format(conn, before.checkpoint_format)
        for statement in backend.drop_typed_times_sql():  # views over the tables: first
            conn.exec_driver_sql(statement)
        reflected = MetaData()
        reflected.reflect(conn)
        reflected.drop_all(conn)


def create_like(path: Path, sources: list[Path]) -> None:
    """Create the empty file of a new SQLite store with the permission bits every one of
    `sources` allows (a private source makes a private target) and, where allowed, the first
    one's group, before a row is written; its side files follow it (SQLite creates them with
    the database's mode). A target that exists already (or whose directory is missing: the
    copy says so when it opens it) is left as it is."""
    modes = FileModes.common(sources)
    if modes is not None:
        modes.create_new(path)
