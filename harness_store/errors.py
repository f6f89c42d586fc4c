"""Typed errors. Every failure a caller can act on has its own class under `StoreError`."""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error harness_store raises on purpose."""


class ResumeError(StoreError):
    """A run cannot be resumed: newer checkpoint format, unknown run, unreadable ledger or policy.

    The Python face of upstream's `Error::Resume`.
    """


class InvalidValueError(StoreError, ValueError):
    """A value cannot be stored in upstream's format (e.g. a negative step, tokens ≥ 2⁶³).

    Raised before anything is written, so the store is unchanged.
    """


class SchemaError(StoreError):
    """The database is not something harness_store will open or upgrade; nothing was changed."""


class NotADatabaseError(SchemaError):
    """The path is not a usable SQLite database: not SQLite, truncated, a directory, empty of
    meaning."""


class ForeignDatabaseError(SchemaError):
    """A database of some other application: it has tables, and they are not an io-harness store."""


class NewerFormatError(SchemaError):
    """The store's checkpoint format (`user_version`) is newer than this package understands."""


class UpgradeRequiredError(SchemaError):
    """The store is older than the schema this package writes, and upgrading was not allowed."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """No store exists at the path, and creating one was not allowed."""


class StoreLockedError(StoreError):
    """Another connection held the write lock for longer than the busy timeout."""


class StoreAccessError(StoreError, PermissionError):
    """The store cannot be written: a read-only file or directory."""


class RunNotFoundError(StoreError, LookupError):
    """A read that upstream answers only for an existing run was asked about a missing one."""
