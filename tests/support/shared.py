"""Where the suite finds what it does not hold: the repository, the shared folder (`SHARED`,
`$HARNESS_SHARED`, default `../shared`) and its real io-harness fixture stores."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from contextlib import closing
from pathlib import Path
from typing import Any, NoReturn

from .provided import unavailable

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("HARNESS_SHARED", REPO.parent / "shared"))
FIXTURES = SHARED / "fixtures"
FIXTURE_STORES = (
    "io-harness-0.22.0/populated",
    "io-harness-0.22.0/interrupted",
    "io-harness-0.22.0/deferred-approval",
    "io-harness-0.29.0/aggregates",
    "io-harness-0.29.0/interrupted",
)


def fixture_missing(source: Path) -> NoReturn:
    """A shared fixture store is not here: skip locally, fail under CI (see `provided`)."""
    unavailable(f"the fixture {source} is not available (set HARNESS_SHARED to the shared folder)")


def copy_fixture(name: str, directory: Path) -> Path:
    """A writable copy of a shared fixture store (the originals must never change)."""
    source = FIXTURES / f"{name}.sqlite3"
    if not source.exists():
        fixture_missing(source)
    target = directory / (name.replace("/", "-") + ".sqlite3")
    shutil.copyfile(source, target)
    target.chmod(target.stat().st_mode | stat.S_IWUSR | stat.S_IRUSR)
    return target


def in_newest_memory_order(
    fixture: str, workspace: str, entries: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A fixture's recorded `memory_list` put in io-harness 0.66's order.

    The fixtures' JSON records what 0.22/0.29 returned: oldest first, a same-stamp tie in id
    order. Since 0.57 upstream breaks that tie on the key, and the Store follows the newest
    release; the stamps come from the original fixture file.
    """
    source = FIXTURES / f"{fixture}.sqlite3"
    # immutable: no -wal/-shm is created beside the original, even by root
    with closing(sqlite3.connect(f"file:{source}?mode=ro&immutable=1", uri=True)) as conn:
        stamps = dict(
            conn.execute("SELECT key, created_at FROM memory WHERE workspace = ?", (workspace,))
        )
    return sorted(entries, key=lambda e: (stamps[e["key"]], e["key"]))
