"""The sources of a sync: parsed, opened read-only (once, from the look at their origin marks
to their pass), refused by name when sync cannot read them (`SOURCE_REFUSALS`), and the
facts of a source that tell its origin (its first run, the anchor)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, LargeBinary, Select, cast, func, select
from sqlalchemy import table as table_clause
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from ..connector.translation import is_untranslated
from ..errors import (
    CopiedWithoutOriginError,
    InvalidValueError,
    OriginOfAnotherRoleError,
    SchemaError,
    StoreError,
    UnfinishedTransactionError,
    UnsendableValueError,
)
from ..models import Base
from ..models.sync import IDS
from ..releases import NEWEST_KNOWN_RELEASE
from ..schema.detect import IGNORED_TABLES, check_sqlite_file, read_tables
from ..store import Store, whole_snapshot
from ..targets import Target
from ..transfer.plan import BOOKKEEPING_TABLES
from ..transfer.reading import open_source
from ..transfer.report import UnknownTablesError
from ..transfer.values import Refusal
from . import origins
from .quarantine import not_utf8
from .report import DuplicateOriginError

Source = str | os.PathLike[str] | URL
"""What names a source: a path, or a `sqlite:` URL."""

Claim = Callable[[str | None], None]
"""Called with a source's origin mark (or None) as a pass read it, before anything is
written: raises (`DuplicateOriginError`) to refuse the source, whose mark another source a
follower follows carries."""

SOURCE_REFUSALS = (
    SchemaError,
    UnfinishedTransactionError,
    CopiedWithoutOriginError,
    UnsendableValueError,
    OriginOfAnotherRoleError,
)
"""What refuses one source (named, nothing of it written) while the others are synced: a
database that is no store sync can read, a store whose writer was killed mid-write (a
hot rollback journal only a write open may roll back), a store whose runs the
destination holds already under no origin, and a store holding a value the destination
cannot hold as it is (named; sent once the row is repaired), or an origin bound to another
role than the follower syncing it."""


KEPT_OPEN = 64
"""At most this many sources stay open from the look at their origin marks to their sync, so
that each is opened once (an open source holds a file descriptor or three); the others are
opened again for their sync."""


def refuse_shared_marks(sources: list[Target]) -> dict[int, Store]:
    """Refuse, before anything is written, two sources that carry one origin mark: copies of
    one marked store would overwrite each other's runs centrally. The Stores opened for the
    look, by position, kept for the sync (at most `KEPT_OPEN`)."""
    seen: dict[str, Path] = {}
    kept: dict[int, Store] = {}
    try:
        for at, source in enumerate(sources):
            store = open_or_none(source)
            value = None if store is None else peek_mark(store)
            if store is not None and len(kept) < KEPT_OPEN:
                kept[at] = store
            elif store is not None:
                store.close()
            path = path_of(source)
            if value is None:
                continue
            if value in seen and seen[value].resolve() != path.resolve():
                raise DuplicateOriginError(
                    f"{seen[value]} and {path} carry the same origin mark {value}: one is a "
                    "copy of the other, and their runs would overwrite each other centrally. "
                    "Nothing was synced; sync only one of them (the store still in use)"
                )
            seen[value] = path
    except BaseException:
        close_all(kept)
        raise
    return kept


def close_all(stores: dict[int, Store]) -> None:
    while stores:
        stores.popitem()[1].close()


def open_or_none(source: Target) -> Store | None:
    """The source's read-only Store, or None when it cannot be opened (it is named, with
    why, when its turn comes)."""
    try:
        return open_store(source)
    except (StoreError, SQLAlchemyError):
        return None


def peek_mark(store: Store) -> str | None:
    """The origin mark of the source `store` reads, if it has one and can be read."""
    try:
        with whole_snapshot(store) as src:
            return origins.read_mark(src)
    except SQLAlchemyError:
        return None


def parse_source(source: Source) -> Target:
    """A source parsed once: a SQLite file that exists (else refused before anything runs)."""
    parsed = Target.parse(source, read_only=True)
    path = parsed.path
    if path is None:
        raise InvalidValueError(
            f"sync reads SQLite store files; {parsed.where} is not one (a PostgreSQL store is "
            "already central: copy it with `harness-store copy` instead)"
        )
    check_sqlite_file(path, writable=False, missing="; nothing to sync")
    return parsed


def path_of(source: Target) -> Path:
    assert source.path is not None  # `parse_source` refused every other
    return source.path


def check_source(conn: Connection, path: Path) -> dict[str, frozenset[str]]:
    """The source's tables and columns, read in its snapshot; refuse a store holding tables
    or columns of a newer io-harness (the centre cannot hold them). What is not a store of
    0.13 or later was refused by the open (`open_source`).

    Its shape is one query on SQLite (`Backend.table_columns`)."""
    have = read_tables(conn)
    unknown = [
        f"{name} ({_count(conn, name)} rows)"
        for name in sorted(have)
        if name not in Base.metadata.tables
        and name not in BOOKKEEPING_TABLES
        and name not in IGNORED_TABLES
        and not name.startswith("sqlite_")
    ]
    unknown += [
        f"{name}.{column}"
        for name in sorted(have)
        if name in Base.metadata.tables
        for column in sorted(have[name] - set(Base.metadata.tables[name].columns.keys()))
    ]
    if unknown:
        raise UnknownTablesError(
            f"{path} has tables or columns of an io-harness newer than {NEWEST_KNOWN_RELEASE}, "
            f"which the central store cannot hold: {', '.join(unknown)}. Nothing of it was "
            "synced; sync it with a harness_store that knows that release"
        )
    return have


def _count(conn: Connection, name: str) -> int:
    return int(conn.execute(select(func.count()).select_from(table_clause(name))).scalar_one())


def open_store(source: Target) -> Store:
    """The source's read-only Store: the one read-only open, refusing what cannot be read
    without an upgrade."""
    path = shlex.quote(str(path_of(source)))
    upgrade = f"`harness-store upgrade {path}`"
    return open_source(source, "synced", refuse=True, upgrade_command=upgrade)[0]


@contextmanager
def opened(source: Target, kept: Store | None) -> Iterator[Store]:
    """The source's Store (`kept` when it is still open from the look at its mark, else
    opened now), closed after the body."""
    store = kept if kept is not None else open_store(source)
    try:
        yield store
    finally:
        store.close()


def refuse_copied_runs(src: Connection, dst: Connection, path: Path, first: int) -> None:
    """Refuse a new origin whose runs the destination holds already under no origin: its
    first run is there with the same id, start and goal, and no origin maps it (a `copy` of
    the store made before copies recorded their source). Syncing it would send every run
    again."""
    from ..models import Run, table_of

    runs = table_of(Run)
    started, raw = src.execute(
        select(runs.c.started_at, cast(runs.c.goal, LargeBinary)).where(runs.c.id == first)
    ).one()
    try:  # read as bytes: a goal that is no UTF-8 text is in no centre (its run is held)
        mine = (started, None if raw is None else bytes(raw).decode("utf-8"))
    except UnicodeDecodeError:
        return
    there = dst.execute(
        select(runs.c.started_at, runs.c.goal).where(
            runs.c.id == first,
            ~select(IDS.c.dest_id).where(IDS.c.tbl == "runs", IDS.c.dest_id == first).exists(),
        )
    ).first()
    if there is None or tuple(there) != tuple(mine):
        return
    raise CopiedWithoutOriginError(
        f"the destination already holds the runs of {path} under no origin (its run {first}, "
        f"started {mine[0]}, is there under the same id): it was seeded by a copy of the store "
        "that recorded no origin, so a sync would send every run again. Nothing of it was "
        "synced; seed the centre again with `harness-store copy` of this version (which "
        "records the store as an origin), or sync into a store that holds none of its runs"
    )


def undecodable_in(
    src: Connection, have: dict[str, frozenset[str]], exc: Exception
) -> list[tuple[str, Refusal]] | None:
    """When `exc` is a read of the source that failed without a code of its driver's (as
    a text whose bytes are not UTF-8 fails), every such text in the source, each with its
    table and run (`quarantine.not_utf8`); else None."""
    if not is_untranslated(exc):
        return None
    try:
        return not_utf8(src, have)
    except Exception:  # the look failed too (a damaged page): the first error is said
        return None


def select_first_run() -> Select[Any]:
    """The id and start of the source's first run: the origin's anchor."""
    from ..models import Run, table_of

    runs = table_of(Run)
    return select(runs.c.id, runs.c.started_at).order_by(runs.c.id).limit(1)


def anchor_differs(src: Connection, anchor: str) -> bool:
    """Whether the source's run with the anchor's id started at another time: the file is a
    new store at a reused inode, not the origin's."""
    from ..models import Run, table_of

    run_id, _, started = anchor.partition(":")
    runs = table_of(Run)
    row = src.execute(select(runs.c.started_at).where(runs.c.id == int(run_id))).first()
    return row is not None and (row[0] or "") != started
