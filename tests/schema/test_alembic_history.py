"""`alembic history` and `heads` as a person reads them and a script diffs them: each revision
shows the release names that mean it (the releases that changed no schema, which are its
branch labels) and no other, in release order, the same from run to run. Alembic spreads a
linear chain's branch labels over every revision, so every line used to carry all 32 labels,
in the order of a set of strings, which changes with each process's hash seed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from support.processes import ALEMBIC_INI

from harness_store.releases import HEAD, NEWEST_KNOWN_RELEASE, REVISIONS, revision_for

ALEMBIC = [str(Path(sys.executable).with_name("alembic"))]


def alembic(*argv: str, seed: int) -> str:
    """Alembic's command line with the repository's ini and a given hash seed."""
    done = subprocess.run(
        [*ALEMBIC, "-c", str(ALEMBIC_INI), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONHASHSEED": str(seed)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def own_labels(revision: str) -> list[str]:
    """The release names that mean `revision` without being revisions, in release order."""
    newest = int(NEWEST_KNOWN_RELEASE.split(".")[1])
    names = [f"0.{minor}" for minor in range(1, newest + 1)]
    return [n for n in names if n not in REVISIONS and revision_for(n) == revision]


LINE = re.compile(r"^(?P<down>\S+) -> (?P<rev>\S+)(?: \((?P<labels>[^)]*)\))?(?: \(head\))?, ")


def test_history_shows_each_revision_its_own_labels_the_same_every_run() -> None:
    first = alembic("history", seed=1)
    assert alembic("history", seed=2) == first
    shown: dict[str, list[str]] = {}
    for line in first.splitlines():
        match = LINE.match(line)
        if match is None:
            continue  # a docstring's second line
        labels = match.group("labels")
        shown[match.group("rev")] = labels.split(", ") if labels and labels != "head" else []
    assert list(shown) == list(reversed(REVISIONS))
    assert shown == {revision: own_labels(revision) for revision in REVISIONS}
    assert shown["0.1"] == [] and shown["0.37"] == ["0.38", "0.39", "0.40", "0.41", "0.42"]


def test_heads_is_the_head_alone() -> None:
    assert alembic("heads", seed=3).splitlines() == [f"{HEAD} (head)"]
