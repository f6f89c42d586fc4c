"""The files of one Parquet export (`Generation`): written under temporary names, then flushed
and renamed into place; and how they are named.

Every file of a table is in the table's own directory and holds all of its columns (a synced
store's `origin` too, null for the rows written centrally), so that a reader given the
directory, with no options, reads exactly the store's columns and types: directories of
Hive partitions would make readers infer the `origin` column's type from directory names,
which pandas and pyarrow's dataset cannot do for a null-only or mixed partition.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..file_modes import FileModes

TEMPORARY = ".tmp"
"""The suffix of a file written but not yet renamed into place."""
MARKS = "_run_marks-{generation:06d}.parquet"
"""The name of a generation's run marks (`run_marks`), beside the manifest that lists it."""

MARK_ROWS = 8_192
"""Runs' marks read back from a marks file at a time."""

MARK_SCHEMA = pa.schema([pa.field("run_id", pa.int64()), pa.field("mark", pa.uint64())])
"""The columns of a marks file: a run's id and its mark, in run id order."""


READ_ROWS = 4_096
"""Rows an export reads from the store at a time (`Store.iter_arrow`'s batches): the driver's
rows of one batch, Python objects each, are what an export holds beside its Arrow data."""

ROW_GROUP_ROWS = 32_768
"""Rows in one row group of a file: the batches read (`READ_ROWS` each) are gathered up to it
(or to `ROW_GROUP_BYTES`) as Arrow data, so a reader's row groups stay this large while the
export holds only one read batch of driver rows at a time."""

ROW_GROUP_BYTES = 4 * 2**20
"""The most Arrow data gathered into one row group (a group is at least one read batch): the
group is held whole, and the writer encodes it beside it, so on wide rows (a step's prompt and
tool call) the group, not the rows read, set the export's peak."""


class Generation:
    """The files one export writes: under temporary names until `publish` renames them, each
    with `modes` (the store's)."""

    def __init__(self, root: Path, generation: int, modes: FileModes) -> None:
        self.root = root
        self.generation = generation
        self.modes = modes
        self.pending: list[Path] = []
        self.count = 0

    def _path(self, table: str) -> tuple[Path, str]:
        self.count += 1
        relative = f"{table}/part-{self.generation:06d}-{self.count:06d}.parquet"
        return self.root / relative, relative

    def write(
        self,
        table: str,
        batches: Iterable[pa.RecordBatch],
        tick: Callable[[int], None],
        *,
        digest: Any = None,
        skip_empty: bool = False,
    ) -> tuple[list[dict[str, Any]], int]:
        """Write `batches` to a new temporary file (none when they hold no rows and
        `skip_empty`); its manifest entries and the rows written."""
        writers: list[tuple[pq.ParquetWriter, str, list[int]]] = []
        rows = 0
        schema: pa.Schema | None = None
        group: list[pa.RecordBatch] = []
        gathered = held = 0
        try:
            for batch in batches:
                if digest is not None:
                    digest.update(batch.serialize())
                schema = batch.schema
                if not batch.num_rows:
                    continue
                rows += batch.num_rows
                if group and held + batch.nbytes > ROW_GROUP_BYTES:
                    self._append(writers, table, group)  # wide rows: the group ends early
                    group, gathered, held = [], 0, 0
                group.append(batch)
                gathered += batch.num_rows
                held += batch.nbytes
                if gathered >= ROW_GROUP_ROWS:
                    self._append(writers, table, group)
                    group, gathered, held = [], 0, 0
                tick(rows)
            if group:
                self._append(writers, table, group)
                group = []
            if not writers and not skip_empty and schema is not None:
                # An empty table still gets a file, so readers find its columns.
                self._append(writers, table, [pa.RecordBatch.from_pylist([], schema=schema)])
        finally:
            for writer, _, _ in writers:
                writer.close()
            end_read(batches)
        return [{"path": relative, "rows": counted[0]} for _, relative, counted in writers], rows

    def write_rows(self, table: str, data: pa.Table) -> list[dict[str, Any]]:
        """Write `data` (rows kept from a file of the last export) to one new temporary
        file; its manifest entry."""
        entries, _ = self.write(table, data.to_batches(), lambda _: None, skip_empty=True)
        return entries

    def _append(
        self,
        writers: list[tuple[pq.ParquetWriter, str, list[int]]],
        table: str,
        batches: list[pa.RecordBatch],
    ) -> None:
        """Write `batches` as one row group, to the table's file (opened on the first)."""
        schema = batches[0].schema
        if not writers:
            path, relative = self._path(table)
            writers.append((self._open(path, schema), relative, [0]))
        writer, _, counted = writers[0]
        data = pa.Table.from_batches(batches, schema)
        writer.write_table(data)  # one row group: it holds fewer rows than a group's limit
        counted[0] += data.num_rows

    def _open(self, path: Path, schema: pa.Schema) -> pq.ParquetWriter:
        self.modes.make_directories(path.parent)
        temporary = path.with_name(path.name + TEMPORARY)
        self.modes.create_file(temporary)  # the writer opens it, keeping its mode
        self.pending.append(path)
        return pq.ParquetWriter(
            temporary, schema, compression="zstd", write_statistics=statistics_columns(schema)
        )

    def write_marks(self, marks: Iterable[pa.RecordBatch]) -> str:
        """Write the store's run marks (`run_marks`' batches) as this generation's marks file,
        a batch at a time as they come; its path relative to the root, for the manifest."""
        relative = MARKS.format(generation=self.generation)
        path = self.root / relative
        temporary = path.with_name(path.name + TEMPORARY)
        self.modes.create_file(temporary)
        self.pending.append(path)
        with pq.ParquetWriter(temporary, MARK_SCHEMA, compression="zstd") as writer:
            for batch in marks:
                writer.write_batch(batch)
        return relative

    def drop(self, entries: list[dict[str, Any]]) -> None:
        """Forget files written for a table that turned out unchanged."""
        for entry in entries:
            path = self.root / entry["path"]
            path.with_name(path.name + TEMPORARY).unlink(missing_ok=True)
            self.pending.remove(path)

    def publish(self) -> None:
        """Flush every new file and rename it into place (still unlisted: the manifest is
        what makes them part of the dataset)."""
        for path in self.pending:
            flush(path.with_name(path.name + TEMPORARY))
        for path in self.pending:
            os.replace(path.with_name(path.name + TEMPORARY), path)
        for directory in {p.parent for p in self.pending}:
            flush_directory(directory)

    def discard(self) -> None:
        """Remove what this export wrote, after a failure, and the tables' directories it
        made that are left empty."""
        for path in self.pending:
            path.with_name(path.name + TEMPORARY).unlink(missing_ok=True)
            path.unlink(missing_ok=True)
        for directory in {p.parent for p in self.pending} - {self.root}:
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()


def statistics_columns(schema: pa.Schema) -> list[str]:
    """The columns whose row groups carry min/max statistics: all but text and bytes. A
    reader skips row groups by ids, numbers and times; the minimum and maximum of prompts and
    outputs serve no filter, and computing them copies each value twice (a 100 MB step took
    500 MB more to write)."""
    return [
        field.name
        for field in schema
        if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)
                or pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type))
    ]  # fmt: skip


def end_read(batches: Iterable[Any]) -> None:
    """End a read of the store's batches that a failure cut off, now, while its connection is
    open: not when the collector finds it after the store closed (a traceback on stderr)."""
    close = getattr(batches, "close", None)
    if close is not None:
        close()


def flush(path: Path) -> None:
    """Force a file's content to disk."""
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def flush_directory(directory: Path) -> None:
    """Force a directory's entries (a rename into it) to disk."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
