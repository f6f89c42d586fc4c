"""PostgreSQL's SQLSTATEs the translation reads, named
(https://www.postgresql.org/docs/current/errcodes-appendix.html).

A psycopg error's SQLSTATE is read by `sqlstate_of` (here) alone; errors are known by
these codes (and a violated constraint's name), never by message text.
"""

from __future__ import annotations

LOCKED_STATES = frozenset({"55P03", "40P01", "40001"})
"""lock_not_available (lock timeout), deadlock_detected, serialization_failure."""
READ_ONLY_STATE = "25006"
PRIVILEGE_STATE = "42501"
"""insufficient_privilege: a grant or a row-level security policy refused the statement."""
DUPLICATE_OBJECT_STATE = "42710"
"""duplicate_object: a role or policy made twice."""
FOREIGN_KEY_STATE = "23503"
OUT_OF_RANGE_STATE = "22003"
"""numeric_value_out_of_range: a BIGINT sum or cast past 64 bits."""
STEPS_RUN_FKEY = "steps_run_id_fkey"
LOGIN_CLASSES = frozenset({"28"})
"""Class 28: invalid_authorization_specification (a role or password the server refused)."""
NO_DATABASE_STATE = "3D000"
"""invalid_catalog_name: a database that does not exist."""
DISK_FULL_STATE = "53100"
"""disk_full."""
LOST_CLASSES = frozenset({"08"})
"""Class 08: connection exceptions."""
LOST_STATES = frozenset({"57P01", "57P02", "57P03"})
"""admin_shutdown (pg_terminate_backend, a fast shutdown), crash_shutdown, cannot_connect_now."""


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLSTATE of a psycopg error (None for any other error, or one without): the one
    reader of a PostgreSQL error's code, which the translation reads (`translate_error`)."""
    state = getattr(exc, "sqlstate", None)
    return state if isinstance(state, str) else None
