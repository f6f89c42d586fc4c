"""One of several writer processes: checkpoint COUNT steps of one run as fast as it can.

    python contention_writer.py PATH RUN_ID COUNT GO_FILE

Prints `ready` once the store is open, waits for GO_FILE (a barrier shared by every process of
the test), checkpoints steps 1..COUNT (1 token each), finishes the run with `success`, and
prints `done COUNT`. Any error ends the process with a traceback and a non-zero exit.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from harness_store import StepRecord, Store


def main() -> None:
    path, run_id, count, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    store = Store.open(path, upgrade=False)
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    for step in range(1, count + 1):
        record = StepRecord(step, f"writer {run_id} step {step}", "ok", "prompt", "{}", 1)
        store.checkpoint_step(run_id, record)
    store.finish_run(run_id, "success")
    store.close()
    print(f"done {count}", flush=True)


if __name__ == "__main__":
    main()
