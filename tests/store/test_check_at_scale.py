"""`check` at a year's size: its memory does not grow with the store's runs. Only the runs it
finds something wrong with reach Python — the suspects of the resume check, the runs with
gaps, the runs no root reaches — never a set or a dict entry per run."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.big_stores import runs_store
from support.clirun import peak_rss_kib

GROWTH_KIB = 16 * 1024
"""What 200,000 more runs may add to the check's peak (a set of every run id, and a dict
entry per run for each of three checks, added about 60 MiB)."""


@pytest.mark.slow
def test_the_checks_memory_does_not_grow_with_the_runs(tmp_path: Path) -> None:
    peaks = {}
    for runs in (50_000, 250_000):
        store = runs_store(tmp_path / f"{runs}.sqlite3", runs)
        peaks[runs] = peak_rss_kib("check", store)
    assert peaks[250_000] - peaks[50_000] < GROWTH_KIB, peaks
