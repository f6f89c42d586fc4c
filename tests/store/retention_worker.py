"""A second process for the retention races: it resumes runs while a prune runs.

`python retention_worker.py resume TARGET PAUSE BELOW RUN...` waits until the store holds
fewer than BELOW runs (the prune has deleted its first unit), then takes each run in the order
given and, in one transaction, sets it `running` and takes its lease (600 s), as a resuming
driver does. It prints `resumed N` once that committed, or `gone N` when the run was already
deleted (the Store says `RunNotFoundError`), flushing each line.
"""

from __future__ import annotations

import sys
import time

from harness_store import Store
from harness_store.errors import RunNotFoundError


def resume(target: str, runs: list[int], pause: float, below: int) -> None:
    with Store.open(target, backup=False) as store:
        print("ready", flush=True)
        deadline = time.monotonic() + 60
        while len(store.runs()) >= below and time.monotonic() < deadline:
            time.sleep(0.002)
        for run in runs:
            try:
                with store.transaction():
                    store.set_status(run, "running")
                    store.acquire_lease(run, 600)
            except RunNotFoundError:
                print(f"gone {run}", flush=True)
            else:
                print(f"resumed {run}", flush=True)
            time.sleep(pause)


if __name__ == "__main__":
    mode, target, pause, below, *rest = sys.argv[1:]
    assert mode == "resume", mode
    resume(target, [int(r) for r in rest], float(pause), int(below))
