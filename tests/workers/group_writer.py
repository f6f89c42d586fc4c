"""Threads of one process writing through one Store at once, until killed.

    python group_writer.py PATH THREADS

Each thread owns one run (started first; their ids are printed as `runs ID …`) and writes in
a tight loop, alternately one `checkpoint_step` and a `checkpoint_steps` of three steps, with
step numbers counting up from 1. Prints `writing` once every thread has committed at least one
call, so the parent kills the process while groups are being committed.
"""

from __future__ import annotations

import sys
import threading

from harness_store import StepRecord, Store


def record(n: int) -> StepRecord:
    return StepRecord(n, "act", "ok", "p" * 200, "{}", 1)


def main() -> None:
    path, threads = sys.argv[1], int(sys.argv[2])
    store = Store.open(path, upgrade=False, synchronous="full")
    runs = [store.start_run(f"agent {k}", "out.txt") for k in range(threads)]
    print("runs " + " ".join(map(str, runs)), flush=True)
    started = threading.Barrier(threads + 1)

    def write(run: int) -> None:
        n = 0
        first = True
        while True:
            store.checkpoint_step(run, record(n + 1))
            store.checkpoint_steps(run, [record(n + 2), record(n + 3), record(n + 4)])
            n += 4
            if first:
                first = False
                started.wait()

    for run in runs:
        threading.Thread(target=write, args=(run,), daemon=True).start()
    started.wait()
    print("writing", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
