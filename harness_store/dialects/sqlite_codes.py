"""SQLite's result codes, the one table of them the package reads
(https://sqlite.org/rescode.html).

Python's sqlite3 reports a driver error's extended code as `sqlite_errorcode`; its low byte
is the primary code (`primary_code`). Errors are known by these codes, never by message text.
"""

from __future__ import annotations

SQLITE_ERROR = 1
"""The generic code (no more specific one exists: SQLite's `SUM` past 64 bits, for one)."""
SQLITE_BUSY = 5
SQLITE_LOCKED = 6
"""With `SQLITE_BUSY`: another connection holds the lock."""
SQLITE_READONLY = 8
SQLITE_IOERR = 10
SQLITE_CORRUPT = 11
"""A damaged page ("database disk image is malformed")."""
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14
SQLITE_NOTADB = 26

SQLITE_READONLY_ROLLBACK = SQLITE_READONLY | (3 << 8)
"""The extended code a read-only connection gets when a hot journal needs rolling back."""
SQLITE_CONSTRAINT_FOREIGNKEY = 787
SQLITE_IOERR_SHMSIZE = SQLITE_IOERR | (19 << 8)
"""No room to extend the WAL's shared-memory file (a full disk, where it lives)."""


def error_code(exc: BaseException) -> int | None:
    """The extended result code of a driver error (or of a SQLAlchemy error's driver error),
    None for any other error."""
    orig = getattr(exc, "orig", None) or exc
    code = getattr(orig, "sqlite_errorcode", None)
    return code if isinstance(code, int) else None


def primary_code(exc: BaseException) -> int | None:
    """The primary result code (the extended code's low byte) of `error_code(exc)`."""
    code = error_code(exc)
    return None if code is None else code & 0xFF
