"""The files of one Parquet export (`Generation`): written under temporary names, partitioned
by origin on a synced store, then flushed and renamed into place; and how they are named."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .compute import equals, filled
from .schema import ORIGIN

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
"""The partition of rows with no origin (written centrally), as Hive and pyarrow name it."""
TEMPORARY = ".tmp"
"""The suffix of a file written but not yet renamed into place."""


class Generation:
    """The files one export writes: under temporary names until `publish` renames them."""

    def __init__(self, root: Path, generation: int, synced: bool) -> None:
        self.root = root
        self.generation = generation
        self.synced = synced
        self.pending: list[Path] = []
        self.count = 0

    def _path(self, table: str, origin: str | None) -> tuple[Path, str]:
        self.count += 1
        part = f"part-{self.generation:06d}-{self.count:06d}.parquet"
        relative = Path(table)
        if self.synced:
            relative /= f"{ORIGIN}={origin if origin is not None else NULL_PARTITION}"
        relative /= part
        return self.root / relative, relative.as_posix()

    def write(
        self,
        table: str,
        batches: Iterable[pa.RecordBatch],
        tick: Callable[[int], None],
        *,
        digest: Any = None,
        skip_empty: bool = False,
    ) -> tuple[list[dict[str, Any]], int]:
        """Write `batches` (partitioned by origin on a synced store) to new temporary files;
        their manifest entries and the rows written."""
        writers: dict[str | None, tuple[pq.ParquetWriter, Path, str, list[int]]] = {}
        rows = 0
        schema: pa.Schema | None = None
        try:
            for batch in batches:
                if digest is not None:
                    digest.update(batch.serialize())
                schema = batch.schema
                if not batch.num_rows:
                    continue
                rows += batch.num_rows
                for origin, part in self._split(batch):
                    self._append(writers, table, origin, part)
                tick(rows)
            if not writers and not skip_empty and schema is not None:
                # An empty table still gets a file, so readers find its columns.
                empty = schema.remove(schema.get_field_index(ORIGIN)) if self.synced else schema
                path, relative = self._path(table, None)
                writers[None] = (self._open(path, empty), path, relative, [0])
        finally:
            entries = []
            for writer, _, relative, counted in writers.values():
                writer.close()
                entries.append({"path": relative, "rows": counted[0]})
        return entries, rows

    def write_rows(self, table: str, origin: str | None, data: pa.Table) -> list[dict[str, Any]]:
        """Write `data` (rows kept from a file of the last export, without `origin`) to one
        new temporary file in `origin`'s partition; its manifest entry."""
        writers: dict[str | None, tuple[pq.ParquetWriter, Path, str, list[int]]] = {}
        try:
            for batch in data.to_batches():
                self._append(writers, table, origin, batch)
        finally:
            for writer, *_ in writers.values():
                writer.close()
        return [{"path": relative, "rows": counted[0]} for _, _, relative, counted in
                writers.values()]  # fmt: skip

    def _split(self, batch: pa.RecordBatch) -> Iterator[tuple[str | None, pa.RecordBatch]]:
        if not self.synced:
            yield None, batch
            return
        index = batch.schema.get_field_index(ORIGIN)
        origins = batch.column(index)
        rest = batch.drop_columns([ORIGIN])
        values = set(origins.to_pylist())
        if len(values) == 1:
            yield values.pop(), rest
            return
        for value in sorted(values, key=lambda v: (v is not None, v or "")):
            mask = pc.is_null(origins) if value is None else equals(origins, value)
            yield value, rest.filter(filled(mask, False))

    def _append(
        self,
        writers: dict[str | None, tuple[pq.ParquetWriter, Path, str, list[int]]],
        table: str,
        origin: str | None,
        batch: pa.RecordBatch,
    ) -> None:
        if origin not in writers:
            path, relative = self._path(table, origin)
            writers[origin] = (self._open(path, batch.schema), path, relative, [0])
        writer, _, _, counted = writers[origin]
        writer.write_batch(batch)
        counted[0] += batch.num_rows

    def _open(self, path: Path, schema: pa.Schema) -> pq.ParquetWriter:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + TEMPORARY)
        self.pending.append(path)
        return pq.ParquetWriter(temporary, schema, compression="zstd")

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
        """Remove what this export wrote, after a failure."""
        for path in self.pending:
            path.with_name(path.name + TEMPORARY).unlink(missing_ok=True)
            path.unlink(missing_ok=True)


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
