"""`sync(sources, dest)`: every source store in turn, each in one destination transaction (into
a SQLite centre, in slices)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, delete, update
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.util import LRUCache

from ..connector import Connector
from ..connector.translation import (
    driver_message,
    is_constraint_violation,
    translated,
)
from ..dialects import backend_named
from ..engine import safe_url, sqlite_path, to_url
from ..errors import (
    DiskFullError,
    InvalidValueError,
    MalformedStoreError,
    PrivilegeError,
    StoreNotFoundError,
    UnsendableValueError,
)
from ..formats import is_int
from ..models.sync import ORIGINS, QUARANTINE, SYNC_METADATA
from ..schema.preflight import is_disk_full, is_malformed
from ..stamps import Stamp
from ..store import Store, whole_snapshot
from ..targets import Target
from ..transfer.reading import (
    WriterAppeared,
    check_source_pages,
    malformed_source_message,
    no_writer_on,
)
from ..transfer.report import UnknownTablesError
from ..transfer.target import create_like
from ..transfer.values import refusal
from . import origins
from .apply import OriginSync
from .destination import Destination, Ready, dry_destination
from .origin_state import BATCH, Overtaken
from .origins import Origin
from .quarantine import Unreadable
from .report import (
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
from .slices import Slices, Writing
from .sources import (
    SOURCE_REFUSALS,
    Claim,
    Source,
    anchor_differs,
    check_source,
    close_all,
    opened,
    parse_source,
    path_of,
    refuse_copied_runs,
    refuse_shared_marks,
    select_first_run,
    undecodable_in,
)

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
    parsed = [parse_source(s) for s in sources]
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
                    create_like(dest_path, [path_of(s) for s in parsed])  # as its sources
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


def _synced(result: OriginReport | RefusedSource) -> bool:
    return isinstance(result, OriginReport)


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
    claim: Claim | None = None,
    ready: Ready | None = None,
) -> OriginReport:
    """One source's sync: read in one snapshot, written in one destination transaction or in
    slices (the pass `sync` makes of each source, and `follow` of a source that changed).
    `ready`, when given, makes the destination ready first in that transaction (a dry run's,
    never sliced). `kept` is
    the source's Store when it is still open, else it is opened here; closed either way.
    Without `check_pages` the source's pages are quick-checked only when it is a new origin
    or read again in full, not when it only grew (a follower checks a file it checked a
    moment ago only now and then: the check reads the whole file). `claim`, when given, is
    called with the source's origin mark (or None) as the pass read it, before anything is
    written, and raises to refuse the source (a follower's: another source it follows
    carries that mark). `dest` is the destination's connector (`Destination.connector`)."""
    writing = partial(_load, dest, not dry_run, ready)
    return _sync_source(
        source, kept, dest, writing, mark, dry_run, on_rows, batch_size, check_pages, claim
    )


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
    claim: Claim | None = None,
) -> OriginReport:
    started = time.monotonic()
    path = path_of(source)
    if mark and not dry_run:
        with opened(source, kept) as store, whole_snapshot(store) as src:
            check_source(src, path)
            marked = origins.read_mark(src)
        kept = None  # closed before the mark is written, opened again after
        if not marked:
            with dest.load() as dst:
                marked = origins.adopt_for_mark(dst, origins.identify(path, None))
            origins.write_mark(path, marked)
    unreadable = None
    with opened(source, kept) as store:
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
                    claim,
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


def _send(
    store: Store,
    writing: Writing,
    path: Path,
    dry_run: bool,
    on_rows: Callable[[int], None],
    batch_size: int,
    started: float,
    check_pages: bool = True,
    claim: Claim | None = None,
    *,
    reading: Writing | None = None,
    unreadable: dict[int, tuple[str, str | None, str | None, str]] | None = None,
) -> OriginReport:
    counts = TableCounts()
    with whole_snapshot(store) as src:
        src.execution_options(compiled_cache=SOURCE_STATEMENTS)
        have = check_source(src, path)
        ident = origins.identify(path, origins.read_mark(src))
        if claim is not None:
            claim(ident.mark)  # a follower refuses a mark another source carries
        origin: Origin | None = None
        try:
            with Slices(writing) as slices:
                dst = slices.dst
                now = now_stamp()
                first = src.execute(select_first_run()).first() if "runs" in have else None
                anchor = f"{first[0]}:{first[1] or ''}" if first is not None else None
                origin = origins.register(dst, ident, now, anchor)
                if origin.anchor and not ident.mark and anchor_differs(src, origin.anchor):
                    origins.retire(dst, origin.id)
                    origin = origins.register(dst, ident, now)
                if origin.created and first is not None:
                    refuse_copied_runs(src, dst, path, int(first[0]))
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
                    found = undecodable_in(src, have, exc)
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
            if reading is not None and origin is not None:
                # slices were committed: a new origin refused is taken back whole, an
                # existing one's row put back as it was
                with writing() as dst:
                    if origin.created:
                        withdraw(src, dst, origin.id, have)
                    else:
                        origins.unregister(dst, origin, now)
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
        have = check_source(src, path)
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
