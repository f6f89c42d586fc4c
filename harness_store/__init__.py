"""harness_store: io-harness run stores in Python — SQLAlchemy models, the Alembic chain of
upstream releases 0.1 → 0.66, and `Store`, upstream's Store API over SQLite or PostgreSQL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import records as _records
from .errors import (
    HeadConflictError,
    LeaseConflictError,
    ResumeError,
    SchemaError,
    StoreError,
)
from .formats import (
    CHECKPOINT_FORMAT,
    MEMORY_MAX_CHARS,
    MEMORY_MAX_ENTRIES,
    MEMORY_MAX_ENTRY_CHARS,
    SUCCESS_OUTCOME,
)
from .lazy import lazy_names

if TYPE_CHECKING:
    from .aio import AsyncStore
    from .records import *  # noqa: F403
    from .store import Lease, Store
    from .transfer import CopyReport, copy_store

RECORDS = tuple(_records.__all__)
"""`harness_store.records`' names, public names of the package too."""

LAZY = {
    **dict.fromkeys(RECORDS, "records"),
    "AsyncStore": "aio",
    "Lease": "store",
    "Store": "store",
    "CopyReport": "transfer",
    "copy_store": "transfer",
}
"""Names imported on first use: `Store` brings the 37 models and the ORM, `copy_store` the copy
machinery, and neither is needed by `alembic upgrade head` or the migrations it loads; the
records load their own modules on first use too, so `harness-store --version` and a shell's
completion load none of them."""


__getattr__ = lazy_names(__name__, LAZY)


__version__ = "0.1.0"

__all__ = [
    "CHECKPOINT_FORMAT",
    "MEMORY_MAX_CHARS",
    "MEMORY_MAX_ENTRIES",
    "MEMORY_MAX_ENTRY_CHARS",
    "SUCCESS_OUTCOME",
    "AsyncStore",
    "CopyReport",
    "HeadConflictError",
    "Lease",
    "LeaseConflictError",
    "ResumeError",
    "SchemaError",
    "Store",
    "StoreError",
    "copy_store",
]
__all__ += RECORDS
