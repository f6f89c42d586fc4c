"""`sync(sources, dest)`: every source store in turn, each in one destination transaction."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Select, inspect, select, update
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError
from sqlalchemy.util import LRUCache

from ..detect import IGNORED_TABLES, StoreKind, check_sqlite_file, diagnose, read_revision
from ..dialects import backend_named
from ..dialects.sqlite import WRITE
from ..engine import make_engine, read_only_url, safe_url, sqlite_path, to_url, where
from ..errors import (
    InvalidValueError,
    SchemaError,
    StoreNotFoundError,
    UpgradeRequiredError,
)
from ..formats import CHECKPOINT_FORMAT
from ..models import Base
from . import origins
from .apply import BATCH, OriginSync
from .report import OriginReport, Progress, SyncReport, TableCounts
from .tables import ORIGINS, SYNC_METADATA

Source = str | os.PathLike[str] | URL

SOURCE_STATEMENTS: LRUCache[Any, Any] = LRUCache(1000)
"""Compiled statements shared by every source's engine (each source has its own engine, whose
own cache would start empty)."""


def now_stamp() -> str:
    """The current time in upstream's stamp format (UTC, milliseconds)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def sync(
    sources: Sequence[Source],
    dest: str | os.PathLike[str] | URL,
    *,
    mark: bool = False,
    dry_run: bool = False,
    progress: Progress | None = None,
    batch_size: int = BATCH,
    workers: int = 2,
) -> SyncReport:
    """Merge the SQLite stores `sources` into the store at `dest` (SQLite or PostgreSQL),
    sending only what changed since each one's last sync; see the package docstring.

    The destination is created or upgraded to head as `Store.open` does. Each source is read
    in one read-only snapshot and written in one destination transaction (with its id maps
    and marks), so a sync killed at any point is completed by the next. With `mark=True` each
    source gets its origin UUID written into it (once); otherwise nothing is ever written to a
    source. With `dry_run=True` every source's transaction is rolled back: the report says
    what a sync would write (the destination's schema is still created if missing).

    On PostgreSQL `workers` sources are synced at once (each in its own transaction), so one
    source is read while another is written; a SQLite destination takes one writer at a time,
    so there they go one by one.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidValueError(f"workers must be a positive int, got {workers!r}")
    started = time.monotonic()
    dest_url = to_url(dest)
    paths = [_source_path(s) for s in sources]
    engine = make_engine(dest_url)
    threads = 1 if backend_named(dest_url.get_backend_name()).one_connection else workers
    done = 0
    lock = threading.Lock()

    def one(path: Path) -> OriginReport:
        nonlocal done
        label = str(path)
        sent = 0

        def on_rows(n: int) -> None:
            nonlocal sent
            sent += n
            if progress is not None:
                with lock:
                    progress(label, done, len(paths), sent)

        if progress is not None:
            with lock:
                progress(label, done, len(paths), 0)
        report = _sync_one(path, engine, mark, dry_run, on_rows, batch_size)
        with lock:
            done += 1
            if progress is not None:
                progress(label, done, len(paths), sent)
        return report

    try:
        _prepare_dest(engine, dest_url)
        if threads <= 1 or len(paths) <= 1:
            reports = [one(path) for path in paths]
        else:
            with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hs-sync") as pool:
                reports = list(pool.map(one, paths))
    finally:
        engine.dispose()
    return SyncReport(safe_url(dest_url), tuple(reports), time.monotonic() - started, dry_run)


def _source_path(source: Source) -> Path:
    url = to_url(source)
    path = sqlite_path(url)
    if path is None:
        raise InvalidValueError(
            f"sync reads SQLite store files; {where(url)} is not one (a PostgreSQL store is "
            "already central: copy it with `harness-store copy` instead)"
        )
    if not path.exists():
        raise StoreNotFoundError(f"no run store at {path}; nothing to sync")
    check_sqlite_file(path, writable=False)
    return path


def _prepare_dest(engine: Engine, url: URL) -> None:
    """Create or upgrade the destination store (as `Store.open` does) and sync's own tables.

    A destination a sync prepared before (at head, sync's tables there, no unfinished copy)
    is known from one look and not opened again."""
    from ..releases import HEAD
    from ..transfer import copy_in_progress

    with engine.connect() as conn, conn.begin():
        names = set(inspect(conn).get_table_names())
        ready = (
            SYNC_METADATA.tables.keys() <= names
            and "alembic_version" in names
            and read_revision(conn) == HEAD
            and not copy_in_progress(conn)
        )
    if ready:
        return
    from ..store import Store

    Store.open(url).close()
    with engine.connect() as conn:
        conn.info[WRITE] = True
        with conn.begin():
            SYNC_METADATA.create_all(conn, checkfirst=True)


@contextmanager
def _snapshot(engine: Engine) -> Iterator[Connection]:
    """One read-only transaction on the source: every read of the sync sees one instant."""
    with engine.connect() as conn:
        conn.info[WRITE] = False
        conn.execution_options(compiled_cache=SOURCE_STATEMENTS)
        with conn.begin():
            yield conn


def _check_source(conn: Connection, path: Path) -> dict[str, frozenset[str]]:
    """The source's tables and columns; refuse what is not a store of 0.13 or later.

    A store of exactly the head shape (the common case) is known from one query; anything
    else goes through `detect.diagnose`, which names what it found."""
    fast = _head_shaped(conn)
    if fast is not None:
        return fast
    found = diagnose(conn)
    if found.kind is StoreKind.EMPTY:
        raise SchemaError(f"{path} holds no run store (it has no tables); nothing to sync")
    if not found.holds_upstream_head:
        raise UpgradeRequiredError(
            f"{path}: {found.describe()}; sync reads stores of io-harness 0.13 or later as they "
            f"are and never changes a source: upgrade it first with `harness-store upgrade "
            f"{path}`, then sync it"
        )
    return dict(found.tables)


HEAD_SHAPE = {name: frozenset(table.columns.keys()) for name, table in Base.metadata.tables.items()}


def _head_shaped(conn: Connection) -> dict[str, frozenset[str]] | None:
    """The source's tables when they are exactly the head's (and its checkpoint format is one
    harness_store reads), else None."""
    if backend_named(conn.dialect.name).checkpoint_format(conn) > CHECKPOINT_FORMAT:
        return None
    found: dict[str, set[str]] = {}
    rows = conn.exec_driver_sql(
        "SELECT m.name, p.name FROM sqlite_master AS m, pragma_table_info(m.name) AS p "
        "WHERE m.type = 'table'"
    )
    for table, column in rows:
        if table not in IGNORED_TABLES and not table.startswith("sqlite_"):
            found.setdefault(table, set()).add(column)
    shape = {name: frozenset(columns) for name, columns in found.items()}
    return shape if shape == HEAD_SHAPE else None


def _sync_one(
    path: Path,
    engine: Engine,
    mark: bool,
    dry_run: bool,
    on_rows: Callable[[int], None],
    batch_size: int,
) -> OriginReport:
    started = time.monotonic()
    src_engine = make_engine(read_only_url(path))
    try:
        if mark and not dry_run:
            with _snapshot(src_engine) as src:
                _check_source(src, path)
                marked = origins.read_mark(src)
            if not marked:
                with engine.connect() as dst, dst.begin():
                    marked = origins.adopt_for_mark(dst, origins.identify(path, None))
                origins.write_mark(path, marked)
        for attempt in (1, 2):
            try:
                return _send(src_engine, engine, path, dry_run, on_rows, batch_size, started)
            except IntegrityError:
                if attempt == 2:  # another sync registered this origin meanwhile: once more
                    raise
        raise AssertionError("unreachable")
    finally:
        src_engine.dispose()


def _send(
    src_engine: Engine,
    engine: Engine,
    path: Path,
    dry_run: bool,
    on_rows: Callable[[int], None],
    batch_size: int,
    started: float,
) -> OriginReport:
    counts = TableCounts()
    with _snapshot(src_engine) as src, engine.connect() as dst:
        have = _check_source(src, path)
        ident = origins.identify(path, origins.read_mark(src))
        dst.info[WRITE] = True
        transaction = dst.begin()
        try:
            now = now_stamp()
            origin = origins.register(dst, ident, now)
            first = src.execute(select_first_run()).first() if "runs" in have else None
            anchor = f"{first[0]}:{first[1] or ''}" if first is not None else None
            if origin.anchor and not ident.mark and _anchor_differs(src, origin.anchor):
                origins.retire(dst, origin.id)
                origin = origins.register(dst, ident, now)
            OriginSync(
                src, dst, origin.id, have, counts, on_rows, batch_size, fresh=origin.created
            ).run()
            if origin.anchor is None and anchor is not None:
                dst.execute(update(ORIGINS).where(ORIGINS.c.id == origin.id).values(anchor=anchor))
        except BaseException:
            transaction.rollback()
            raise
        if dry_run:
            transaction.rollback()
        else:
            transaction.commit()
    return OriginReport(
        source=str(path),
        origin=origin.uuid,
        new_origin=origin.created,
        marked=ident.mark is not None,
        counts=counts,
        seconds=time.monotonic() - started,
        committed=not dry_run,
    )


def select_first_run() -> Select[Any]:
    """The id and start of the source's first run: the origin's anchor."""
    from ..models import Run, table_of

    runs = table_of(Run)
    return select(runs.c.id, runs.c.started_at).order_by(runs.c.id).limit(1)


def _anchor_differs(src: Connection, anchor: str) -> bool:
    """Whether the source's run with the anchor's id started at another time: the file is a
    new store at a reused inode, not the origin's."""
    from ..models import Run, table_of

    run_id, _, started = anchor.partition(":")
    runs = table_of(Run)
    row = src.execute(select(runs.c.started_at).where(runs.c.id == int(run_id))).first()
    return row is not None and (row[0] or "") != started
