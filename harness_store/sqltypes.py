"""Column types shared by the models and the migrations."""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer
from sqlalchemy.types import TypeEngine

INT: TypeEngine[int] = BigInteger().with_variant(Integer(), "sqlite")
"""`INTEGER` on SQLite (so `INTEGER PRIMARY KEY` is the rowid, as upstream declares it), and
`BIGINT` elsewhere, because upstream's ids are `i64` and its token counts `u64`."""
