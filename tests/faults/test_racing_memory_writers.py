"""Several real processes on one store: memory caps hold, and each eviction is reported once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness_store import Store
from harness_store.formats import MEMORY_MAX_ENTRIES

WORKERS = Path(__file__).resolve().parents[1] / "workers"


def test_concurrent_memory_puts_keep_the_cap_and_evict_each_key_once(pg_url: str) -> None:
    """PostgreSQL's READ COMMITTED let two puts each miss the other's row (65 entries, one key
    reported twice). SQLite's writes hold the whole database, so it has no such race (its
    fairness under tight-loop writers is another matter, item 11)."""
    store_target = pg_url
    with Store.open(store_target) as store:
        run = store.start_run("memory", "out.txt")
    workers, count = 4, 120
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKERS / "memory_filler.py"),
                store_target,
                str(run),
                str(w),
                str(count),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    evicted: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        for line in out.splitlines():
            evicted += json.loads(line)
    with Store.open(store_target) as store:
        kept = [e.key for e in store.memory_list("/ws/shared")]
    put = {f"w{w}-{i}" for w in range(workers) for i in range(count)}
    assert len(kept) == MEMORY_MAX_ENTRIES
    assert len(evicted) == len(set(evicted)), "a key was reported evicted by two callers"
    assert set(evicted).isdisjoint(kept)
    assert set(evicted) | set(kept) == put
