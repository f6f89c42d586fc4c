"""support.legacy re-states each release's open and writes in Python, for what the oracles
cannot make (torn opens, fixtures of exact shapes). Where the two overlap they must agree: the
schema a legacy builder leaves is the one the release's own open leaves — born at that release,
and grown release by release — and the rows it writes are rows that release reads.

support.legacy builds 0.1 … 0.13 (`CLASSIC`); the releases after 0.13 are built from their
oracles and upstream's schema in tests/schema/test_upgrades_of_oracle_stores.py, so only those
are compared here."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from support import legacy

from harness_store import Store

from .hsdump import differences, harness_dump, in_head_memory_order, project, refusals
from .oracles import Oracles
from .releases import CLASSIC, OracleRelease, ids


def schema(path: Path) -> dict[str, Any]:
    with closing(sqlite3.connect(path)) as conn:
        return {
            "columns": legacy.table_shapes(conn),
            "create": legacy.create_texts(conn),
            "indexes": sorted(
                conn.execute("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index'")
            ),
            "user_version": conn.execute("PRAGMA user_version").fetchone(),
            "journal_mode": conn.execute("PRAGMA journal_mode").fetchone(),
        }


@pytest.mark.parametrize("release", CLASSIC, ids=ids(CLASSIC))
def test_a_legacy_built_store_has_the_schema_the_release_opens(
    release: OracleRelease, tmp_path: Path, oracles: Oracles
) -> None:
    built, opened = tmp_path / "legacy.sqlite3", tmp_path / "oracle.sqlite3"
    legacy.build_born_at(built, release.revision)
    oracles.run(release, "open", opened)
    assert schema(built) == schema(opened)

    grown, chain = tmp_path / "legacy-lineage.sqlite3", tmp_path / "oracle-lineage.sqlite3"
    legacy.build_lineage(grown, release.revision)
    for earlier in CLASSIC:
        if earlier.parts <= release.parts:
            oracles.run(earlier, "open", chain)
    assert schema(grown) == schema(chain)


@pytest.mark.parametrize("release", CLASSIC, ids=ids(CLASSIC))
def test_legacy_written_rows_are_rows_the_release_reads(
    release: OracleRelease, tmp_path: Path, oracles: Oracles
) -> None:
    built = tmp_path / "legacy.sqlite3"
    legacy.build_born_at(built, release.revision)
    theirs = oracles.dump(release, built)
    assert theirs["run_ids"], "the builder wrote runs"
    assert refusals(theirs) == []
    upgraded = tmp_path / "upgraded.sqlite3"
    shutil.copyfile(built, upgraded)
    with Store.open(upgraded, backup=False) as store:
        ours = harness_dump(store, release.name)
    theirs = in_head_memory_order(theirs)
    assert differences(project(ours, theirs), theirs) == []
