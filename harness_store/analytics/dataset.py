"""A store as a Parquet dataset: one directory per table, written incrementally and atomically.

Layout: `DIR/<table>/part-<generation>-<n>.parquet`, each file with every column of the table
(on a synced store, `origin` too: null for rows written centrally), a table of no rows a file
of no rows; and `DIR/_manifest.json`, which lists every file of the dataset with its rows.
The manifest is the dataset: files it does not list are not part of it. So each table's
directory is what any Parquet reader opens as it is.

Incremental: an append-only table (rows only inserted, ids never reused) is written from the
id after the last export's high-water mark, into new files beside the old ones. Rows below
the mark change only a whole run at a time — archived in place, or pruned — and those runs'
rows are written again or removed (`changes`); should the rows below the mark still not be
the store's, the table is written again whole. A table whose rows change in place is read
whole and written again only when what it holds changed (a digest of its Arrow data).

Atomic: new files are written under temporary names, flushed to disk, renamed into place,
and then the manifest is replaced (written aside, flushed, renamed) — the one step that makes
the new export the dataset. Files it no longer lists are deleted after. An export killed at
any point leaves the previous manifest and every file it lists; the next export clears what
the killed one left and completes it.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..arrow.schema import TABLES, shape_of
from ..errors import DiskFullError, InvalidValueError, UnreadableValueError
from ..file_modes import FileModes
from ..schema.preflight import is_disk_full
from ..store import read_snapshot
from ..store.arrow import arrow_schema, count_rows, is_synced, run_marks
from ..store.check_rows import model_table
from ..targets import sqlite_path
from ..transfer.values import undecodable
from .changes import Replaced, TouchedRuns, replace_changed_runs
from .files import (
    MARK_ROWS,
    READ_ROWS,
    TEMPORARY,
    Generation,
    end_read,
    flush,
    flush_directory,
)
from .lock import exclusive

if TYPE_CHECKING:
    from ..store import Store

MANIFEST = "_manifest.json"
MANIFEST_FORMAT = 3
"""Format 3: the run marks in a Parquet file the manifest names (2: in the manifest itself, a
JSON object as large as the store's runs; 1: a synced store's files in Hive partitions by
origin, without the column). A dataset of an earlier format is written again whole."""
FORMATS = (1, 2, MANIFEST_FORMAT)
MARKS_FILE = re.compile(r"^_run_marks-\d+\.parquet$")
PART = re.compile(r"^part-\d+-\d+\.parquet$")

Progress = Callable[[str, int, int, int], None]
"""Called as `progress(table, tables_done, tables_total, rows_written_of_table)`."""


@dataclass
class TableExport:
    """What one export did to one table."""

    table: str
    action: str
    """`appended` (new rows in new files), `updated` (the rows of runs that changed or were
    pruned since written again, and any new rows), `rewritten` (the whole table anew),
    `unchanged`."""
    rows: int
    """Rows read from the store and written by this export."""
    total_rows: int
    """Rows of the table in the dataset afterwards."""
    removed: int = 0
    """Rows of an append-only table that left the dataset: those of runs pruned (deleted)
    from the store since the last export. (A state table is written again whole, so its
    rows of pruned runs leave it too.)"""


@dataclass
class ExportReport:
    """What `export_parquet` did."""

    directory: str
    generation: int
    tables: list[TableExport] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)


def export_parquet(
    store: Store,
    directory: str | os.PathLike[str],
    *,
    tables: Iterable[str] | None = None,
    since: str | None = None,
    runs: Iterable[int] | None = None,
    progress: Progress | None = None,
) -> ExportReport:
    """Write (or bring up to date) the Parquet dataset of `store` in `directory` (see the
    module's docstring). `tables` chooses tables (all by default), `since` and `runs` filter
    rows as `Store.arrow` does; an export with other filters than the last one's rewrites the
    tables it writes. Returns what was written."""
    names = list(TABLES if tables is None else tables)
    for name in names:
        shape_of(name)  # refuses unknown tables before anything is written
    if len(set(names)) != len(names):
        raise InvalidValueError("a table is named twice")
    run_ids = None if runs is None else sorted({int(r) for r in runs})
    marks = run_marks(store)  # a store to upgrade is refused before anything is created
    synced = is_synced(store)
    root = Path(directory)
    modes = FileModes.of(sqlite_path(store.url))
    try:
        modes.make_directories(root)
        with exclusive(root, modes):
            manifest = read_manifest(root)
            clear_leftovers(root, manifest)
            filters = {"since": since, "runs": run_ids}
            current = (
                manifest.get("format") == MANIFEST_FORMAT and manifest.get("filters") == filters
            )
            previous = intact_tables(root, manifest) if current else {}
            generation = int(manifest.get("generation", 0)) + 1
            known = _known_marks(root, manifest) if current else None
            run = _Run(store, root, modes, names, filters, synced, TouchedRuns(known, marks))
            return run.export(previous, generation, progress, manifest.get("run_marks"))
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        raise DiskFullError(out_of_space(root)) from None


class _NoPandas(importlib.abc.MetaPathFinder):
    """An import finder that says pandas is not installed."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r} (not needed here)", name=name)


def spare_pandas() -> None:
    """For a process that exports and needs nothing of pandas (the command): keep pyarrow
    from importing it. pyarrow imports pandas, where it is installed, on its first conversion
    of Python values, only to ask whether they are pandas objects; loaded, it took about
    130 MiB more of an export's peak. Nothing later in this process can import pandas; where
    it is already imported, nothing changes."""
    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


def out_of_space(root: Path) -> str:
    """What a person reads when the disk fills under an export: the failed export's files
    are gone (`Generation.discard`), so the dataset is the last export's."""
    kept = (
        "the dataset is as the last export left it"
        if (root / MANIFEST).is_file()
        else "no dataset was there and no file of one was left"
    )
    return (
        f"{root}: the disk is full; {kept}, nothing of this export was kept. Free some space "
        "and run the export again"
    )


@dataclass
class _Run:
    """One export, under the directory's lock."""

    store: Store
    root: Path
    modes: FileModes
    names: list[str]
    filters: dict[str, Any]
    synced: bool
    marks: TouchedRuns

    def export(
        self,
        previous: dict[str, Any],
        generation: int,
        progress: Progress | None,
        last_marks: str | None,
    ) -> ExportReport:
        """Write the marks (streamed as they are compared with the last export's, and
        dropped again for the last export's file, `last_marks`, when they are the same), the
        tables, then the manifest."""
        store, root, names = self.store, self.root, self.names
        since, run_ids = self.filters["since"], self.filters["runs"]
        writer = Generation(root, generation, self.modes)
        report = ExportReport(str(root), generation)
        entries: dict[str, Any] = dict(previous)
        try:
            marks_file = writer.write_marks(self.marks)
            if self.marks.same and last_marks is not None:
                writer.drop([{"path": marks_file}])
                marks_file = last_marks
            touched = self.marks.runs
            for done, name in enumerate(names):
                tick = _ticker(progress, name, done, len(names))
                try:
                    entry, result = _export_table(
                        store, writer, name, previous.get(name), (since, run_ids), touched, tick
                    )
                except Exception as exc:
                    # A driver's failure to decode text names no row: look for the row.
                    ours = isinstance(exc, UnreadableValueError) or is_disk_full(exc)
                    found = None if ours else undecodable_text(store, name)
                    if found is None:
                        raise
                    raise UnreadableValueError(
                        f"{found}; the export stopped, nothing of it was kept (`harness-store "
                        "check` names every such row)"
                    ) from None
                entries[name] = _not_empty(store, writer, name, entry)
                report.tables.append(result)
                tick(result.rows)
            writer.publish()
            new_manifest = {
                "format": MANIFEST_FORMAT,
                "generation": generation,
                "synced": self.synced,
                "filters": self.filters,
                "run_marks": marks_file,
                "tables": entries,
            }
            _write_manifest(root, new_manifest, self.modes)
        except BaseException:
            writer.discard()  # files the last manifest does not list: the dataset is its
            raise
        clear_leftovers(root, new_manifest)
        if progress is not None:
            progress("", len(names), len(names), 0)
        return report


def undecodable_text(store: Store, name: str) -> str | None:
    """After a read of `name` failed: its first text whose bytes are not UTF-8 (which no
    read as text can return, and a Parquet string cannot hold), said with its row and
    column, as `copy` and `sync` say it; None when there is none."""
    table = model_table(name)
    with read_snapshot(store) as conn:
        return undecodable(conn, table, list(table.columns))


def intact_tables(root: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest's tables whose files are all there: a table missing one (deleted by
    hand, or by an export that did not hold the lock) is not trusted, and written again
    whole by the export (or, if not exported this time, left out of the dataset)."""
    return {
        name: entry
        for name, entry in manifest.get("tables", {}).items()
        if all((root / f["path"]).is_file() for f in entry.get("files", []))
    }


def _ticker(progress: Progress | None, table: str, done: int, total: int) -> Callable[[int], None]:
    def tick(rows: int) -> None:
        if progress is not None:
            progress(table, done, total, rows)

    return tick


def _export_table(
    store: Store,
    writer: Generation,
    name: str,
    previous: dict[str, Any] | None,
    filters: tuple[str | None, list[int] | None],
    touched: set[int] | None,
    tick: Callable[[int], None],
) -> tuple[dict[str, Any], TableExport]:
    since, runs = filters
    if shape_of(name).append_only:
        return _export_append(store, writer, name, previous, filters, touched, tick)
    digest = hashlib.blake2b(digest_size=16)
    files, rows = writer.write(
        name,
        store.iter_arrow(name, since=since, runs=runs, batch_rows=READ_ROWS),
        tick,
        digest=digest,
    )
    if previous is not None and previous.get("digest") == digest.hexdigest():
        writer.drop(files)
        return previous, TableExport(name, "unchanged", 0, int(previous["rows"]))
    entry = {"append_only": False, "rows": rows, "digest": digest.hexdigest(), "files": files}
    return entry, TableExport(name, "rewritten", rows, rows)


def _export_append(
    store: Store,
    writer: Generation,
    name: str,
    previous: dict[str, Any] | None,
    filters: tuple[str | None, list[int] | None],
    touched: set[int] | None,
    tick: Callable[[int], None],
) -> tuple[dict[str, Any], TableExport]:
    """New rows above the last export's high-water mark appended; the rows below it of runs
    changed or pruned since written again (`changes`); the whole table written again when
    the dataset's rows below the mark still are not the store's (or it has no marks yet)."""
    since, runs = filters
    shape = shape_of(name)
    key = shape.key[0]
    after: int | None = None
    replaced: Replaced | None = None
    if previous is not None and previous.get("append_only") is True and touched is not None:
        hwm = previous.get("hwm")
        if hwm is None:  # the last export found no rows: all there is now is new
            replaced = Replaced([], 0)
        else:
            replaced = replace_changed_runs(
                store, writer, shape, previous, touched, filters, int(hwm), tick
            )
            kept = count_rows(store, name, since=since, runs=runs, through=int(hwm))
            if kept == replaced.rows:
                after = int(hwm)
            else:  # rows it wrote changed otherwise: the table is written again whole
                writer.drop(replaced.new_files)
                replaced = None
    highest: list[int] = []

    def tracked(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            for batch in batches:
                if batch.num_rows:
                    highest.append(pc.max(batch.column(key)).as_py())
                yield batch
        finally:
            end_read(batches)  # a failed write ends the read with it

    batches = tracked(
        store.iter_arrow(name, since=since, runs=runs, after=after, batch_rows=READ_ROWS)
    )
    files, rows = writer.write(name, batches, tick, skip_empty=replaced is not None)
    if replaced is not None and previous is not None:
        changed = bool(replaced.written or replaced.removed or replaced.new_files)
        if not rows and not changed:
            return previous, TableExport(name, "unchanged", 0, int(previous["rows"]))
        total = replaced.rows + rows
        hwm = max(highest) if highest else previous.get("hwm")
        entry = {"append_only": True, "rows": total, "hwm": hwm,
                 "files": [*replaced.files, *files]}  # fmt: skip
        action = "updated" if changed else "appended"
        done = TableExport(name, action, replaced.written + rows, total, replaced.removed)
        return entry, done
    hwm = max(highest) if highest else None
    entry = {"append_only": True, "rows": rows, "hwm": hwm, "files": files}
    return entry, TableExport(name, "rewritten", rows, rows)


def _not_empty(
    store: Store, writer: Generation, name: str, entry: dict[str, Any]
) -> dict[str, Any]:
    """`entry`, with a file of no rows when it has no file left (every row of its runs
    pruned): a table always has a file, so readers find its columns."""
    if entry["files"]:
        return entry
    empty = pa.RecordBatch.from_pylist([], schema=arrow_schema(store, name))
    files, _ = writer.write(name, [empty], lambda _: None)
    return {**entry, "files": files}


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The dataset's manifest (empty when there is none yet); `InvalidValueError` for a
    directory holding something else."""
    path = Path(directory) / MANIFEST
    if not path.exists():
        return {}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidValueError(f"{path} is not a harness_store dataset manifest: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") not in FORMATS:
        raise InvalidValueError(f"{path} is not a harness_store dataset manifest")
    return manifest


def _write_manifest(root: Path, manifest: dict[str, Any], modes: FileModes) -> None:
    path = root / MANIFEST
    temporary = path.with_name(path.name + TEMPORARY)
    try:
        modes.create_file(temporary)
        temporary.write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        flush(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    flush_directory(root)


def _known_marks(root: Path, manifest: dict[str, Any]) -> Iterator[pa.RecordBatch] | None:
    """The run marks of the export `manifest` describes, read a batch at a time as they are
    taken; None when its file is gone (then every run may have changed)."""
    name = manifest.get("run_marks")
    if not isinstance(name, str) or not MARKS_FILE.match(name) or not (root / name).is_file():
        return None
    return _batches_of(root / name)


def _batches_of(path: Path) -> Iterator[pa.RecordBatch]:
    with pq.ParquetFile(path) as file:
        yield from file.iter_batches(batch_size=MARK_ROWS)


def clear_leftovers(root: Path, manifest: dict[str, Any]) -> None:
    """Delete the dataset files the manifest does not list (a killed or replaced export's):
    only files named as an export names them, inside the tables' directories, and run marks
    files beside the manifest."""
    listed = {
        entry["path"]
        for table in manifest.get("tables", {}).values()
        for entry in table.get("files", [])
    }
    for name in TABLES:
        directory = root / name
        if not directory.is_dir():
            continue
        for path in directory.rglob("part-*"):
            stem = path.name.removesuffix(TEMPORARY)
            if PART.match(stem) and path.relative_to(root).as_posix() not in listed:
                path.unlink()
        for partition in directory.iterdir():
            if partition.is_dir() and not any(partition.iterdir()):
                partition.rmdir()
    for path in root.glob("_run_marks-*"):
        if MARKS_FILE.match(path.name.removesuffix(TEMPORARY)) and path.name != manifest.get(
            "run_marks"
        ):
            path.unlink()
    (root / (MANIFEST + TEMPORARY)).unlink(missing_ok=True)


def dataset_files(directory: str | os.PathLike[str], table: str) -> list[Path]:
    """The files of `table` in the dataset at `directory`, as its manifest lists them."""
    shape_of(table)
    manifest = read_manifest(directory)
    entry = manifest.get("tables", {}).get(table)
    if entry is None:
        raise InvalidValueError(f"the dataset at {directory} holds no table {table!r}")
    return [Path(directory) / f["path"] for f in entry["files"]]


def read_dataset(directory: str | os.PathLike[str], table: str) -> pa.Table:
    """`table` of the dataset at `directory` as one Arrow table, in key order as
    `Store.arrow` returns it (the files its manifest lists)."""
    files = dataset_files(directory, table)
    import pyarrow.dataset as ds  # on first use: it loads pandas

    dataset = ds.dataset([str(f) for f in files], format="parquet")
    return dataset.to_table().sort_by([(k, "ascending") for k in shape_of(table).key])
