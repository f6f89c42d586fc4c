"""Rust → Python: a store written by each release's own Store code (the oracle's `write`) reads
through harness_store exactly as that release reads it — read-only where the store holds the
whole 0.13 schema, and after `Store.open` upgrades it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from harness_store import Store
from harness_store.errors import UpgradeRequiredError

from .hsdump import differences, harness_dump, project
from .oracles import Oracles
from .releases import HEAD_RELEASE, UP_TO_HEAD, OracleRelease, ids


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("release", UP_TO_HEAD, ids=ids(UP_TO_HEAD))
def test_an_upstream_written_store_reads_identically(
    release: OracleRelease, tmp_path: Path, oracles: Oracles
) -> None:
    path = tmp_path / "upstream.sqlite3"
    oracles.run(release, "write", path)
    theirs = oracles.dump(release, path)
    assert len(theirs["run_ids"]) == 4

    if release == HEAD_RELEASE:
        with Store.open(path, read_only=True) as store:
            assert differences(harness_dump(store, release.name), theirs) == []
    else:
        before = digest(path)
        with pytest.raises(UpgradeRequiredError):
            Store.open(path, read_only=True)
        assert digest(path) == before

    with Store.open(path, backup=False) as store:
        ours = harness_dump(store, release.name)
    # every field this release's API reads, as it read it before the upgrade …
    assert differences(project(ours, theirs), theirs) == []
    # … and every field 0.13 reads, as upstream 0.13 reads the upgraded store
    assert differences(ours, {**oracles.dump(HEAD_RELEASE, path), "release": release.name}) == []
