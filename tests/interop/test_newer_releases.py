"""Releases after 0.13 (0.18 … 0.66), whose oracles have `open` and `dump` (0.66 also `write`).

harness_store's chain now runs to 0.65 (#14). Checked here for every newer release in the list:

- a store that release creates, or a 0.13 store it has migrated, upgraded to head (`alembic
  upgrade head`), is read by the release byte-identically to before, and harness_store reads
  every 0.13 field of every run as that release's Store does;
- the same store read read-only without the upgrade (which `Store.open(read_only=True)` accepts
  for any store holding the 0.13 schema) reads the same: the Store's reads of later columns
  (memory `kind`/`pinned`, 0.30; `runs.turn_kind`, 0.37) read an older store as that release
  does. The round trips of each release's own stores (fresh, walked, torn) are in
  tests/schema/test_upgrades_of_oracle_stores.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from support.tiers import sampled

from harness_store import Store

from .hsdump import differences, harness_dump
from .oracles import Oracles
from .releases import API_RELEASE, NEWER, NEWER_WRITERS, OracleRelease, ids
from .rustdebug import parse
from .test_releases_both_ways import alembic

COMPARED = (
    "steps", "provider", "status", "run_status", "children", "parent", "depth", "spent_tokens",
    "tree_run_ids", "spent_tokens_tree", "agent_count_tree", "check_resumable",
    "canonical_trace", "run_policy", "observations", "mcp_events", "context_events",
    "run_summary", "events", "agent_events", "checkpoint_events", "sandbox_events",
)  # fmt: skip
"""The 0.13 fields a newer dump renders (in Rust's Debug form) and harness_store reads."""


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"_type"}:
            return value["_type"]
        return {k: _plain(v) for k, v in value.items() if k != "_type"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if value == ():
        return "ok"  # `Ok(())`: what `check_resumable` renders for a resumable run
    return value


def _lower(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _lower(v) for k, v in value.items()}
    return value.lower() if isinstance(value, str) else value


def newer_view(run: dict[str, Any]) -> dict[str, Any]:
    """A newer oracle's run, as the 0.13 fields harness_store reads: Debug parsed, and enum
    variants in the names serde stores them under (`Allow` → `allow`, `Read` → `read`)."""
    out = {}
    for key in COMPARED:
        value = run[key]
        if isinstance(value, str):
            value = parse(value)
        value = _plain(value)
        if key == "observations" and isinstance(value, list):
            value = [{**o, "kind": o["kind"].lower()} for o in value]
        if key == "run_policy" and isinstance(value, dict) and "layers" in value:
            value = {
                "layers": [
                    {"name": layer["name"], "rules": [_lower(r) for r in layer["rules"]]}
                    for layer in value["layers"]
                ],
                "defaults": _lower(value["defaults"]),
            }
        out[key] = value
    return out


def reads_as_the_release_does(path: Path, release: OracleRelease, oracles: Oracles) -> int:
    """harness_store (read-only) reads every run of the store as the release's dump shows it;
    the number of runs."""
    theirs = oracles.dump(release, path)
    with Store.open(path, read_only=True) as store:
        ours = harness_dump(store)
    assert ours["run_ids"] == theirs["run_ids"]
    assert ours["runs_api"] == parse(theirs["runs_api"])
    for mine, run in zip(ours["runs"], theirs["runs"], strict=True):
        view = newer_view(run)
        assert differences({k: mine[k] for k in COMPARED}, view, f"run {run['id']}") == []
    return len(theirs["run_ids"])


def upgraded_copy(path: Path) -> Path:
    """A copy of the store at `path`, beside it, upgraded to head here; `path` is left as is."""
    upgraded = path.with_name(f"upgraded-{path.name}")
    shutil.copyfile(path, upgraded)
    alembic(upgraded, "upgrade", "head")
    return upgraded


@pytest.mark.parametrize("release", sampled(NEWER, ids=ids(NEWER)))
def test_a_store_the_release_creates_opens_read_only_and_upgrades_without_changing_its_dump(
    release: OracleRelease, tmp_path: Path, oracles: Oracles
) -> None:
    path = tmp_path / "newer.sqlite3"
    oracles.run(release, "open", path)
    before = oracles.dump_text(release, path)
    upgraded = upgraded_copy(path)
    assert oracles.dump_text(release, upgraded) == before
    assert reads_as_the_release_does(upgraded, release, oracles) == 0
    # read-only, not upgraded (an empty store: only memory is read)
    assert reads_as_the_release_does(path, release, oracles) == 0


@pytest.mark.parametrize("release", sampled(NEWER, ids=ids(NEWER)))
def test_a_0_13_store_the_release_migrated_reads_as_that_release_reads_it(
    release: OracleRelease, tmp_path: Path, oracles: Oracles
) -> None:
    """A 0.13 store, upgraded to head here or not, then migrated by the newer release: the
    release's dump is the same either way, and harness_store reads it as the release does."""
    plain = tmp_path / "plain.sqlite3"
    oracles.run(API_RELEASE, "write", plain)
    upgraded = upgraded_copy(plain)
    assert oracles.dump_text(release, upgraded) == oracles.dump_text(release, plain)
    assert reads_as_the_release_does(upgraded, release, oracles) == 4
    assert reads_as_the_release_does(plain, release, oracles) == 4


@pytest.mark.parametrize("release", NEWER_WRITERS, ids=ids(NEWER_WRITERS))
def test_a_store_the_release_wrote_reads_as_that_release_reads_it(
    release: OracleRelease, tmp_path: Path, oracles: Oracles
) -> None:
    path = tmp_path / "written.sqlite3"
    oracles.written(release, path)
    runs = reads_as_the_release_does(path, release, oracles)
    assert runs >= 4
    before = oracles.dump_text(release, path)
    alembic(path, "upgrade", "head")
    assert oracles.dump_text(release, path) == before
    assert reads_as_the_release_does(path, release, oracles) == runs
