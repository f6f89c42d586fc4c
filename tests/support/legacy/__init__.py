"""Build SQLite run stores exactly as io-harness releases 0.1 … 0.13 leave them.

The test-suite needs real legacy stores (born at a release, grown release by release, or
torn by a crash during an open) without any io-harness binary. Everything here follows the
upstream `src/state.rs` of each tag: the statements an open runs and in which order, the SQL
each write and read method runs, and the row formats. Standard library only, and deliberately
independent of `harness_store`, so it can judge it.
"""

from __future__ import annotations

from .opens import (
    CHECKPOINT_FORMAT,
    FILE_PRAGMAS,
    RELEASES,
    is_file_connection,
    new_sqlite,
    open_as,
    open_statements,
    torn_points,
)
from .reads import read_answers
from .tables import column_names, create_texts, dump, table_shapes, user_tables
from .writes import (
    AWKWARD,
    BIG,
    LONG_TEXT_CHARS,
    OBS_KINDS,
    WORKSPACES,
    WrittenRows,
    build_born_at,
    build_lineage,
    build_torn,
    long_text,
    write_rows,
)

__all__ = [
    "AWKWARD",
    "BIG",
    "CHECKPOINT_FORMAT",
    "FILE_PRAGMAS",
    "LONG_TEXT_CHARS",
    "OBS_KINDS",
    "RELEASES",
    "WORKSPACES",
    "WrittenRows",
    "build_born_at",
    "build_lineage",
    "build_torn",
    "column_names",
    "create_texts",
    "dump",
    "is_file_connection",
    "long_text",
    "new_sqlite",
    "open_as",
    "open_statements",
    "read_answers",
    "table_shapes",
    "torn_points",
    "user_tables",
    "write_rows",
]
