"""Rust → Python: a store written by each classic release's own Store code (the oracle's `write`,
0.1 … 0.13) reads through harness_store exactly as that release reads it — read-only where the
store holds the whole 0.13 schema, and after `Store.open` upgrades it to head. The 0.66 writer's
store is covered in test_newer_releases.py."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from support.tiers import sampled

from harness_store import Store
from harness_store.errors import UpgradeRequiredError

from .hsdump import differences, harness_dump, project
from .oracles import Oracles
from .releases import API_RELEASE, CLASSIC, OracleRelease, ids


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("release", sampled(CLASSIC, keep=4, ids=ids(CLASSIC)))
def test_an_upstream_written_store_reads_identically(
    release: OracleRelease, tmp_path: Path, oracles: Oracles
) -> None:
    path = tmp_path / "upstream.sqlite3"
    theirs = oracles.written(release, path)
    assert len(theirs["run_ids"]) == 4

    if release == API_RELEASE:
        with Store.open(path, read_only=True) as store:
            read = harness_dump(store, release.name)
        assert differences(project(read, theirs), theirs) == []
    else:
        before = digest(path)
        with pytest.raises(UpgradeRequiredError):
            Store.open(path, read_only=True)
        assert digest(path) == before

    with Store.open(path, backup=False) as store:
        ours = harness_dump(store, release.name)
    # every field this release's API reads, as it read it before the upgrade …
    assert differences(project(ours, theirs), theirs) == []
    # … and every field 0.13 reads, as upstream 0.13 reads the upgraded store (fields later
    # releases added, such as memory's `kind`/`pinned`, are not 0.13's to read)
    at_api = {**oracles.dump(API_RELEASE, path), "release": release.name}
    assert differences(project(ours, at_api), at_api) == []
