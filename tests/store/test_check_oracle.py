"""A store `repair` fixed still opens and reads in io-harness 0.66 (its own Store, compiled
from the tag), exactly as it did before the damage; and io-harness's own open of a store
leaves nothing for `check` to find."""

from __future__ import annotations

import shutil
from pathlib import Path

from interop.oracles import Oracles
from interop.releases import NEWER_WRITERS

from harness_store import Store

from .checkkit import kinds, lost_lease, plant, populated

NEWEST = NEWER_WRITERS[-1]


def snapshot(oracles: Oracles, path: Path, name: str) -> str:
    """io-harness's dump of a copy (its open may write: the store itself stays as it is)."""
    copy = path.with_name(name)
    shutil.copyfile(path, copy)
    return oracles.dump_text(NEWEST, copy)


def test_a_repaired_store_reads_in_io_harness_as_before_the_damage(
    oracles: Oracles, tmp_path: Path
) -> None:
    path = tmp_path / "runs.sqlite3"
    store, runs = populated(str(path))
    store.close()  # the WAL is checkpointed into the file, which is copied whole
    before = snapshot(oracles, path, "before.sqlite3")
    with Store.open(path) as store:
        plant(
            store,
            "DROP INDEX run_events_run",
            "DROP INDEX rewinds_run",
            "CREATE INDEX rewinds_run ON rewinds (at)",
            "DROP TRIGGER hs_spend_update",
            lost_lease(9004),
            f"UPDATE hs_spend_priced_runs SET calls = calls + 1 WHERE run_id = {runs['root']}",
        )
        repaired = store.repair()
        assert repaired.after.healthy, kinds(repaired.after)
    assert snapshot(oracles, path, "after.sqlite3") == before


def test_io_harness_opening_a_checked_store_leaves_it_healthy(
    oracles: Oracles, tmp_path: Path
) -> None:
    path = tmp_path / "runs.sqlite3"
    store, _ = populated(str(path))
    store.close()
    oracles.run(NEWEST, "open", path)
    with Store.open(path, read_only=True) as reader:
        assert reader.check().findings == ()
