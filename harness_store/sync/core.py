"""`sync(sources, dest)`: every source store in turn, each in one destination transaction (into
a SQLite centre, in slices)."""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    LargeBinary,
    Select,
    cast,
    delete,
    func,
    inspect,
    select,
    update,
)
from sqlalchemy import table as table_clause
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.util import LRUCache

from ..connector import Connector, connector_at
from ..connector.translation import (
    driver_message,
    is_constraint_violation,
    is_untranslated,
    translated,
)
from ..dialects import backend_for, backend_named
from ..engine import safe_url, sqlite_path, to_url, where
from ..errors import (
    CopiedWithoutOriginError,
    DiskFullError,
    InvalidValueError,
    MalformedStoreError,
    OriginOfAnotherRoleError,
    PrivilegeError,
    SchemaError,
    StoreError,
    StoreNotFoundError,
    UnfinishedTransactionError,
    UnsendableValueError,
)
from ..formats import is_int
from ..models import Base
from ..models.sync import IDS, ORIGINS, QUARANTINE, SYNC_METADATA
from ..releases import NEWEST_KNOWN_RELEASE
from ..schema.copy_marker import refuse_unfinished_copy
from ..schema.detect import IGNORED_TABLES, check_sqlite_file, read_revision, read_tables
from ..schema.preflight import is_disk_full, is_malformed
from ..stamps import Stamp
from ..store import Store, create_head_schema, whole_snapshot
from ..targets import Target
from ..transfer.plan import BOOKKEEPING_TABLES
from ..transfer.reading import (
    WriterAppeared,
    check_source_pages,
    malformed_source_message,
    no_writer_on,
    open_source,
)
from ..transfer.report import UnknownTablesError
from ..transfer.target import create_like
from ..transfer.values import Refusal, refusal
from . import origins
from .apply import OriginSync
from .destination import Destination
from .origin_state import BATCH, Carry, Overtaken
from .origins import Origin
from .quarantine import Unreadable, not_utf8
from .report import (
    DuplicateOriginError,
    OriginReport,
    Progress,
    RefusedSource,
    SyncRefusedError,
    SyncReport,
    TableCounts,
    merged,
)
from .rows import model_table, source_columns
from .rules import RULES

Source = str | os.PathLike[str] | URL

SOURCE_STATEMENTS: LRUCache[Any, Any] = LRUCache(1000)
"""Compiled statements shared by every source's Store (each source has its own, whose engine's
own cache would start empty)."""


def now_stamp() -> str:
    """The current time in upstream's stamp format (UTC, milliseconds)."""
    return Stamp.now().text


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
    and marks; into a SQLite centre in slices of at most `SLICE` rows or `batch_size`, each
    with the maps and marks of its rows), so a sync killed at any point is completed by the
    next. With `mark=True` each
    source gets its origin UUID written into it (once); otherwise nothing is ever written to a
    source. With `dry_run=True` every source's transaction is rolled back: the report says
    what a sync would write, and nothing is written anywhere: a missing SQLite destination
    is not created, one below head is not upgraded (`SyncReport.dest_setup` says what a sync
    would first do to it), see `dry_destination`.

    On PostgreSQL `workers` sources are synced at once (each in its own transaction), so one
    source is read while another is written; a SQLite destination takes one writer at a time,
    so there they go one by one.

    Raises `DuplicateOriginError` (nothing synced) when two sources carry one origin mark, and
    `SyncRefusedError` after syncing the others when some sources were refused (damaged,
    older than 0.13, or holding tables or columns of a newer io-harness); its `report` is what
    this call synced.
    """
    if not is_int(batch_size) or batch_size < 1:
        raise InvalidValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if not is_int(workers) or workers < 1:
        raise InvalidValueError(f"workers must be a positive int, got {workers!r}")
    started = time.monotonic()
    dest_url = to_url(dest)
    parsed = [_source(s) for s in sources]
    kept = refuse_shared_marks(parsed)
    one_writer = backend_named(dest_url.get_backend_name()).one_connection
    threads = 1 if one_writer or dry_run else workers
    done = 0
    lock = threading.Lock()
    central: Connector
    ready: Ready | None = None
    setup: str | None = None

    def one(at: int, source: Target) -> OriginReport | RefusedSource:
        nonlocal done
        label = source.where
        sent = 0

        def on_rows(n: int) -> None:
            nonlocal sent
            sent += n
            if progress is not None:
                with lock:
                    progress(label, done, len(parsed), sent)

        if progress is not None:
            with lock:
                progress(label, done, len(parsed), 0)
        try:
            report: OriginReport | RefusedSource = sync_source(
                source, kept.pop(at, None), central, mark, dry_run, on_rows, batch_size, ready=ready
            )
        except SOURCE_REFUSALS as exc:
            report = RefusedSource(label, exc)
        with lock:
            done += 1
            if progress is not None:
                progress(label, done, len(parsed), sent)
        return report

    def each(which: list[Target]) -> list[OriginReport | RefusedSource]:
        if threads <= 1 or len(which) <= 1:
            return [one(at, source) for at, source in enumerate(which)]
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hs-sync") as pool:
            return list(pool.map(one, range(len(which)), which))

    dest_path = sqlite_path(dest_url)
    if dest_path is not None and not dest_path.parent.is_dir():
        raise StoreNotFoundError(
            f"cannot create a store at {dest_path}: no directory {dest_path.parent}; nothing "
            "was synced"
        )
    created = dest_path is not None and not dry_run and not dest_path.exists()
    try:
        with ExitStack() as stack:
            if dry_run:
                central, ready, setup = stack.enter_context(dry_destination(dest_url))
            else:
                if dest_path is not None and parsed:
                    create_like(dest_path, [_path_of(s) for s in parsed])  # as its sources
                destination = stack.enter_context(Destination(dest_url))
                destination.prepare()
                central = destination.connector
            results = each(parsed)
            uncovered = any(isinstance(r, OriginReport) and r.uncovered for r in results)
            if not dry_run and len(parsed) > 1 and uncovered:
                # a deleted memory entry may uncover another origin's: those origins send it now
                close_all(kept)  # none is left by the first pass; they are opened again
                done = 0
                again = each([s for s, r in zip(parsed, results, strict=True) if _synced(r)])
                results = merged(results, again)
    except Exception as exc:
        if dest_path is None or not is_disk_full(exc):
            raise
        if not created:  # each transaction is whole: what was committed is kept
            raise DiskFullError(
                f"{dest_path}: the disk is full; the sync stopped: what it had committed is "
                "kept, the rest was rolled back, nothing half-written. Free some space and run "
                "it again: it sends the rest"
            ) from None
        raise DiskFullError(_no_store_left(dest_path)) from None
    finally:
        close_all(kept)
    report = SyncReport(
        safe_url(dest_url),
        tuple(r for r in results if isinstance(r, OriginReport)),
        time.monotonic() - started,
        dry_run,
        tuple(r for r in results if isinstance(r, RefusedSource)),
        setup,
    )
    if report.refused:
        raise SyncRefusedError(report)
    return report


def _no_store_left(path: Path) -> str:
    """Remove the SQLite store a sync began at `path` and ran out of space in (the file,
    its journal and WAL), and say so."""
    from ..dialects.read_only_files import JOURNAL_SUFFIX, SIDE_SUFFIXES, beside

    for file in [path, *(beside(path, side) for side in (*SIDE_SUFFIXES, JOURNAL_SUFFIX))]:
        file.unlink(missing_ok=True)
    return (
        f"{path}: the disk is full; no store was created and no file was left there, and "
        "nothing was synced. Free some space and run it again"
    )


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


def _synced(result: OriginReport | RefusedSource) -> bool:
    return isinstance(result, OriginReport)


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
            path = _path_of(source)
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
        return _open(source)
    except (StoreError, SQLAlchemyError):
        return None


def peek_mark(store: Store) -> str | None:
    """The origin mark of the source `store` reads, if it has one and can be read."""
    try:
        with whole_snapshot(store) as src:
            return origins.read_mark(src)
    except SQLAlchemyError:
        return None


def _source(source: Source) -> Target:
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


def _path_of(source: Target) -> Path:
    assert source.path is not None  # `_source` refused every other
    return source.path


def prepare_dest(dest: Connector, url: URL) -> None:
    """Create or upgrade the destination store (as `Store.open` does) and sync's own tables.

    A destination a sync prepared before (at head, sync's tables there, no unfinished copy)
    is known from one look and not opened again. `dest` is the destination's connector (held
    by a `Destination` for a sync or a follower)."""
    with dest.translated():  # a role refused: typed
        _prepare(dest, url)


def _prepare(dest: Connector, url: URL) -> None:
    from ..releases import HEAD
    from ..transfer import copy_in_progress

    with dest.snapshot() as conn:
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

    with dest.released():
        Store.open(url).close()
    with dest.load() as conn:
        SYNC_METADATA.create_all(conn, checkfirst=True)
        backend_for(conn).keep_rules(conn)  # a sync table new here gets the roles' rules too


Ready = Callable[[Connection], None]
"""What makes the destination ready for a sync inside the transaction of one source's changes
(a dry run's, rolled back with them)."""


@contextmanager
def dry_destination(url: URL) -> Iterator[tuple[Connector, Ready, str | None]]:
    """The destination of a dry run: its connector, what makes it ready for a sync inside
    each source's transaction (which a dry run rolls back: never committed), and what a sync
    would first do to the destination, said for a person (None when it is ready).

    Each source's transaction first makes the destination what a sync makes it (a store
    built, upgraded to head, sync's tables added), then syncs the source into it, so a dry
    run's counts are a sync's own. A SQLite file that does not exist is not created: an
    empty store in memory stands for it."""
    from ..releases import HEAD
    from ..schema.detect import diagnose

    shown = where(url)
    path = sqlite_path(url)
    missing = path is not None and not path.exists()
    if path is not None:
        check_sqlite_file(path, missing=None)  # what is no file a store can be is refused
    with connector_at(to_url(":memory:") if missing else url) as central:
        with central.snapshot() as conn:
            names = set(inspect(conn).get_table_names())
            if names:
                refuse_unfinished_copy(conn, shown)
            before = read_revision(conn) if names else None
            found = diagnose(conn) if names and before != HEAD else None
        setup: str | None = None
        if missing or not names:
            state = "does not exist" if missing else "holds no store"
            setup = f"{shown} {state}: a sync would create it at revision {HEAD}"
        elif found is not None:
            then = " (after a backup)" if path is not None else ""
            setup = f"{shown}: {found.describe()}; a sync would upgrade it to revision {HEAD}{then}"
        elif not SYNC_METADATA.tables.keys() <= names:
            setup = f"{shown} was never synced into: a sync would add its own tables"

        def ready(dst: Connection) -> None:
            if missing or not names:
                create_head_schema(dst)
            elif found is not None:
                from ..schema.migrate import upgrade

                upgrade(url, backup=False, connection=dst)
            SYNC_METADATA.create_all(dst, checkfirst=True)

        with central.load(commit=False) as conn:  # what the sync refuses, before any source
            ready(conn)
        yield central, ready, setup


def _check_source(conn: Connection, path: Path) -> dict[str, frozenset[str]]:
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


def sync_source(
    source: Target,
    kept: Store | None,
    dest: Connector,
    mark: bool,
    dry_run: bool,
    on_rows: Callable[[int], None],
    batch_size: int,
    *,
    check_pages: bool = True,
    carry: Carry | None = None,
    ready: Ready | None = None,
) -> OriginReport:
    """One source's sync: read in one snapshot, written in one destination transaction or in
    slices (the pass `sync` makes of each source, and `follow` of a source that changed).
    `ready`, when given, makes the destination ready first in that transaction (a dry run's,
    never sliced). `kept` is
    the source's Store when it is still open, else it is opened here; closed either way.
    Without `check_pages` the source's pages are quick-checked only when it is a new origin
    or read again in full, not when it only grew (a follower checks a file it checked a
    moment ago only now and then: the check reads the whole file). `carry` is what a
    follower keeps of the source from pass to pass (`origin_state.Carry`). `dest` is the
    destination's connector (`Destination.connector`)."""
    writing = partial(_load, dest, not dry_run, ready)
    return _sync_source(
        source, kept, dest, writing, mark, dry_run, on_rows, batch_size, check_pages, carry
    )


Writing = Callable[[], AbstractContextManager[Connection]]
"""The destination transaction one source's changes are written in."""


@contextmanager
def _load(dest: Connector, commit: bool, ready: Ready | None) -> Iterator[Connection]:
    with dest.load(commit=commit) as conn:
        if ready is not None:
            ready(conn)
        yield conn


def _sync_source(
    source: Target,
    kept: Store | None,
    dest: Connector,
    writing: Writing,
    mark: bool,
    dry_run: bool,
    on_rows: Callable[[int], None],
    batch_size: int,
    check_pages: bool,
    carry: Carry | None = None,
) -> OriginReport:
    started = time.monotonic()
    path = _path_of(source)
    if mark and not dry_run:
        with _opened(source, kept) as store, whole_snapshot(store) as src:
            _check_source(src, path)
            marked = origins.read_mark(src)
        kept = None  # closed before the mark is written, opened again after
        if not marked:
            with dest.load() as dst:
                marked = origins.adopt_for_mark(dst, origins.identify(path, None))
            origins.write_mark(path, marked)
    unreadable = None
    with _opened(source, kept) as store:
        for attempt in (1, 2, 3):
            try:
                return _send(
                    store,
                    writing,
                    path,
                    dry_run,
                    on_rows,
                    batch_size,
                    started,
                    check_pages,
                    carry,
                    reading=dest.snapshot if not dry_run and dest.backend.one_connection else None,
                    unreadable=unreadable,
                )
            except Unreadable as exc:  # made again, holding the runs of those texts
                unreadable = exc.found
            except WriterAppeared:
                pass  # a writer opened the store while it was read as a still file: again
            except UnsendableValueError as exc:
                raise UnsendableValueError(
                    f"{path}: {exc}; nothing of it was synced (it is, once that row is repaired)"
                ) from None
            except SQLAlchemyError as exc:
                if is_constraint_violation(exc):
                    if attempt == 3:  # another sync registered this origin meanwhile: once more
                        raise
                    continue
                if is_malformed(exc):
                    raise MalformedStoreError(
                        malformed_source_message(str(path), driver_message(exc), "synced")
                    ) from None
                refused = translated(dest.backend, exc)
                if isinstance(refused, PrivilegeError):  # the centre's roles refused it
                    raise refused from None
                raise
    raise AssertionError("unreachable")


def _open(source: Target) -> Store:
    """The source's read-only Store: the one read-only open, refusing what cannot be read
    without an upgrade."""
    path = shlex.quote(str(_path_of(source)))
    upgrade = f"`harness-store upgrade {path}`"
    return open_source(source, "synced", refuse=True, upgrade_command=upgrade)[0]


@contextmanager
def _opened(source: Target, kept: Store | None) -> Iterator[Store]:
    """The source's Store (`kept` when it is still open from the look at its mark, else
    opened now), closed after the body."""
    store = kept if kept is not None else _open(source)
    try:
        yield store
    finally:
        store.close()


def _send(
    store: Store,
    writing: Writing,
    path: Path,
    dry_run: bool,
    on_rows: Callable[[int], None],
    batch_size: int,
    started: float,
    check_pages: bool = True,
    carry: Carry | None = None,
    *,
    reading: Writing | None = None,
    unreadable: dict[int, tuple[str, str | None, str | None, str]] | None = None,
) -> OriginReport:
    counts = TableCounts()
    with whole_snapshot(store) as src:
        src.execution_options(compiled_cache=SOURCE_STATEMENTS)
        have = _check_source(src, path)
        ident = origins.identify(path, origins.read_mark(src))
        if carry is not None:
            carry.claim(ident.mark)  # a follower refuses a mark another source carries
        origin: Origin | None = None
        try:
            with Slices(writing) as slices:
                dst = slices.dst
                now = now_stamp()
                first = src.execute(select_first_run()).first() if "runs" in have else None
                anchor = f"{first[0]}:{first[1] or ''}" if first is not None else None
                origin = origins.register(dst, ident, now, anchor)
                if origin.anchor and not ident.mark and _anchor_differs(src, origin.anchor):
                    origins.retire(dst, origin.id)
                    origin = origins.register(dst, ident, now)
                if origin.created and first is not None:
                    _refuse_copied_runs(src, dst, path, int(first[0]))
                if origin.anchor is None and anchor is not None:
                    dst.execute(
                        update(ORIGINS).where(ORIGINS.c.id == origin.id).values(anchor=anchor)
                    )
                work = OriginSync(
                    src,
                    dst,
                    origin.id,
                    have,
                    counts,
                    on_rows,
                    batch_size,
                    fresh=origin.created,
                    check_pages=lambda: check_source_pages(src, str(path), "synced"),
                )
                work.check_growth = check_pages
                work.carry = carry
                if reading is not None:  # written in slices, the maps read in `reading`
                    slices.reading = reading
                    slices.check = no_writer_on(store, src)
                    work.slices = slices
                work.unreadable = dict(unreadable or {})
                try:
                    work.run()
                except Overtaken:
                    pass  # the pass that overtook this one sends the rest
                except Exception as exc:
                    found = _undecodable_in(src, have, exc)
                    if not found:
                        raise
                    runless = [(t, r) for t, r in found if r[0] is None]
                    if runless or unreadable is not None:  # no run to hold, or held already
                        table, (_, row, column, said) = (runless or found)[0]
                        said = f"{table}.{column} of the row {row} {said}"
                        raise UnsendableValueError(said) from None
                    runs: dict[int, tuple[str, str | None, str | None, str]] = {}
                    for table, (run, row, column, said) in found:
                        assert run is not None
                        runs.setdefault(run, (table, row, column, said))
                    raise Unreadable(runs) from None
                no_writer_on(store, src)()
        except (UnsendableValueError, Unreadable):
            if reading is not None and origin is not None and origin.created:
                # slices were committed: a new origin refused is taken back whole
                with writing() as dst:
                    withdraw(src, dst, origin.id, have)
            raise
    return OriginReport(
        source=str(path),
        origin=origin.uuid,
        new_origin=origin.created,
        marked=ident.mark is not None,
        counts=counts,
        seconds=time.monotonic() - started,
        committed=not dry_run,
        reread=work.reread,
        warnings=origin.warnings,
        uncovered=work.uncovered,
        quarantined=tuple(work.quarantined),
        released=tuple(work.released),
    )


class Slices:
    """The destination transactions one source's changes are written in: one, or (a SQLite
    centre, whose writers wait for each) one after another (`origin_state.SliceControl`):
    the first registers the origin, a read snapshot (`reading`) reads its id maps and marks,
    and each slice then commits its rows with theirs. The one open when the body raises is
    rolled back (a snapshot ended); the ones committed before stay."""

    def __init__(self, writing: Writing) -> None:
        self.writing = writing
        self.reading: Writing | None = None
        self.check: Callable[[], None] = lambda: None
        """Raises when the source is no longer as it was read (checked before each commit)."""
        self.stack = ExitStack()
        self.dst = self.stack.enter_context(writing())
        self.writes = True

    def __enter__(self) -> Slices:
        return self

    def __exit__(self, *exc: Any) -> bool | None:
        return self.stack.__exit__(*exc)

    def _end(self) -> None:
        if self.writes:
            self.check()
        self.stack.close()
        self.stack = ExitStack()

    def open_slice(self) -> Connection:
        self._end()
        self.dst = self.stack.enter_context(self.writing())
        self.writes = True
        return self.dst

    def commit(self) -> None:
        self._end()
        self.writes = False

    def read(self) -> Connection:
        assert self.reading is not None
        self._end()
        self.writes = False
        return self.stack.enter_context(self.reading())


def withdraw(
    src: Connection, dst: Connection, origin_id: int, have: dict[str, frozenset[str]]
) -> None:
    """Delete a new origin a pass refused after some of its slices were committed: its
    central rows (read from its id maps in the centre), maps, marks and row, so the refused
    source leaves nothing behind, as a refusal in one transaction leaves nothing."""
    work = OriginSync(src, dst, origin_id, have, TableCounts())
    work._load()
    work._forget()
    dst.execute(delete(QUARANTINE).where(QUARANTINE.c.origin_id == origin_id))
    dst.execute(delete(ORIGINS).where(ORIGINS.c.id == origin_id))


def adopt_copy(src: Connection, dst: Connection, path: Path) -> str | None:
    """Record the SQLite store at `path`, whose snapshot `src` was just copied into `dst` with
    its ids unchanged (`copy_store`, in its transaction on `dst`), as an origin of `dst`, with
    the id maps and marks a sync of that snapshot would have left, so that a later sync of
    the store sends only what changed since the copy. The origin's UUID; None, nothing
    recorded, for a store sync refuses (one with tables of a newer io-harness, or a link
    that is no id)."""
    try:
        have = _check_source(src, path)
    except UnknownTablesError:
        return None
    target = backend_named(dst.dialect.name)
    for rule in RULES:  # a link that is no id: the store is one sync refuses, by name
        if rule.table in have:
            columns = source_columns(rule, have)
            if refusal(src, model_table(rule), columns, target, links=rule.links) is not None:
                return None
    SYNC_METADATA.create_all(dst, checkfirst=True)
    ident = origins.identify(path, origins.read_mark(src))
    first = src.execute(select_first_run()).first() if "runs" in have else None
    origin = origins.register(dst, ident, now_stamp())
    if first is not None:
        anchor = f"{first[0]}:{first[1] or ''}"
        dst.execute(update(ORIGINS).where(ORIGINS.c.id == origin.id).values(anchor=anchor))
    work = OriginSync(src, dst, origin.id, have, TableCounts(), fresh=True)
    work.adopt = True
    work.run()
    return origin.uuid


def _refuse_copied_runs(src: Connection, dst: Connection, path: Path, first: int) -> None:
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


def _undecodable_in(
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


def _anchor_differs(src: Connection, anchor: str) -> bool:
    """Whether the source's run with the anchor's id started at another time: the file is a
    new store at a reused inode, not the origin's."""
    from ..models import Run, table_of

    run_id, _, started = anchor.partition(":")
    runs = table_of(Run)
    row = src.execute(select(runs.c.started_at).where(runs.c.id == int(run_id))).first()
    return row is not None and (row[0] or "") != started
