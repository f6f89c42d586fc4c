"""`harness-store inspect` on the real fixtures and legacy stores: what it names, and that
the file's bytes stay as they were."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.shared import FIXTURE_STORES
from support.tiers import sampled

from .commandkit import (
    Copy,
    as_json,
    digest,
    ok,
    sql,
)

# --- inspect -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sampled(FIXTURE_STORES, keep=2))
def test_inspect_fixture_names_its_release_and_is_unchanged(fixture_copy: Copy, name: str) -> None:
    path = fixture_copy(name)
    release = "0.22" if "0.22.0" in name else "0.28"  # 0.29 changed no schema
    before = digest(path)
    out = ok("inspect", path)
    assert f"io-harness {release} store" in out
    assert "user_version: 7" in out and "journal mode: wal" in out
    doc = as_json("inspect", path)
    assert doc["kind"] == "upstream" and doc["release"] == release and doc["readable"] is True
    assert doc["revision"] is None and doc["at_head"] is False
    assert doc["user_version"] == 7 and doc["journal_mode"] == "wal"
    assert doc["size_bytes"] == path.stat().st_size
    assert doc["extra"] == []
    tables = [r[0] for r in sql(path, "SELECT name FROM sqlite_master WHERE type='table'")]
    expected = {
        t: sql(path, f'SELECT COUNT(*) FROM "{t}"')[0][0]
        for t in tables
        if not t.startswith("sqlite_")
    }
    assert doc["tables"] == expected
    assert digest(path) == before
    assert sql(path, "SELECT name FROM sqlite_master WHERE name = 'alembic_version'") == []


def test_inspect_torn_store_says_torn_and_switches_nothing(torn: Path) -> None:
    before = digest(torn)
    out = ok("inspect", torn)
    assert "torn open of 0.7" in out
    assert "journal mode: delete" in out
    doc = as_json("inspect", torn)
    assert doc["torn_of"] == "0.7" and doc["release"] == "0.6" and doc["readable"] is False
    assert doc["missing"] and doc["present"]
    assert digest(torn) == before
    assert sql(torn, "PRAGMA journal_mode") == [("delete",)]
    assert not torn.with_name(torn.name + "-wal").exists()


def test_inspect_legacy_store(born_05: Path) -> None:
    before = digest(born_05)
    doc = as_json("inspect", born_05)
    assert doc["description"] == "io-harness 0.5 store"
    assert (doc["revision"], doc["shape_revision"], doc["user_version"]) == (None, "0.5", 0)
    assert doc["tables"]["runs"] == sql(born_05, "SELECT COUNT(*) FROM runs")[0][0]
    assert "harness-store upgrade" in ok("inspect", born_05)
    assert digest(born_05) == before
