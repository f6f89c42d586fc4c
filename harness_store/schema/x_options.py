"""The `alembic -x KEY=VALUE` options the migration environment reads, parsed once and
strictly: a mistyped key (`-x url=…` for `-x db=…`) or a value that is not one (`-x
backup=nope`) must not fall through to the default target or the default behaviour, so
anything but the known options is refused with one line listing them, before any database is
touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InvalidTargetError, MigrationOptionError
from ..targets import checked_schema, url_of

KNOWN = ("db=PATH_OR_URL", "backup=yes|no", "schema=NAME")
"""The options, as the refusal lists them."""

YES = frozenset({"yes", "true", "on", "1"})
NO = frozenset({"no", "false", "off", "0"})
"""The spellings of a yes or no value (any case)."""


@dataclass(frozen=True)
class XOptions:
    """What `-x` said: the target (`db`), whether to back up (`backup`) and the PostgreSQL
    schema of its own the store lives in (`schema`); None where the option was not given."""

    db: str | None = None
    backup: bool | None = None
    schema: str | None = None


def _refused(why: str) -> MigrationOptionError:
    known = ", ".join(f"-x {option}" for option in KNOWN)
    return MigrationOptionError(f"{why}; nothing was changed (the known options: {known})")


def parse_x_options(given: Sequence[str]) -> XOptions:
    """The options in `given` (Alembic's `cmd_opts.x`, each `KEY=VALUE`), or
    `MigrationOptionError`. The refusal names an unknown option by its key only: its value
    may be a URL with a password."""
    seen: dict[str, str] = {}
    for argument in given:
        key, equals, value = argument.partition("=")
        key = key.strip()
        if key not in ("db", "backup", "schema"):
            raise _refused(f"unknown option -x {key}")
        if not equals or not value.strip():
            raise _refused(f"-x {key} needs a value (-x {key}=…)")
        if key in seen:
            raise _refused(f"-x {key} was given twice")
        seen[key] = value.strip()
    if "db" in seen:
        try:
            url = url_of(seen["db"])
        except InvalidTargetError as exc:
            raise _refused(f"-x db: {exc}") from None
        if "schema" in seen:
            try:
                checked_schema(seen["schema"], url.get_backend_name())
            except InvalidTargetError as exc:
                raise _refused(f"-x schema: {exc}") from None
    elif "schema" in seen:
        try:
            checked_schema(seen["schema"], "postgresql")  # the name; the backend when known
        except InvalidTargetError as exc:
            raise _refused(f"-x schema: {exc}") from None
    backup: bool | None = None
    if "backup" in seen:
        spelled = seen["backup"].lower()
        if spelled not in YES | NO:
            raise _refused(f"-x backup={seen['backup']} is neither yes nor no")
        backup = spelled in YES
    return XOptions(db=seen.get("db"), backup=backup, schema=seen.get("schema"))
