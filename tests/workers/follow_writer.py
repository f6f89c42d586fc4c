"""A live io-harness-like writer for the `sync --follow` tests: one Store kept open, runs of
ten steps committed one step at a time (each with its checkpoint marker), at a steady pace.

    follow_writer.py PATH STOP_FILE STEPS_PER_SECOND [MAX_STEPS]

Prints `ready` once the store is open, `wrote N` after every ten steps, and `idle N` once
MAX_STEPS are written (the store then stays open, idle); stops when STOP_FILE exists, then
prints `done N` (N: steps committed).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from harness_store import StepRecord, Store


def main() -> None:
    path, stop_file, pace = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
    most = int(sys.argv[4]) if len(sys.argv) > 4 else None
    gap = 1.0 / pace
    written = 0
    with Store.open(path, synchronous="normal") as store:
        print("ready", flush=True)
        run = None
        next_at = time.monotonic()
        while not stop_file.exists():
            if most is not None and written >= most:
                print("idle", written, flush=True)
                while not stop_file.exists():
                    time.sleep(0.05)
                break
            if run is None:
                run = store.start_run(f"live {written}", "/live.rs")
            step = written % 10 + 1
            store.checkpoint_step(run, StepRecord.new(step, f"d{written}", "ok"))
            written += 1
            if step == 10:
                store.finish_run(run, "success")
                run = None
                print("wrote", written, flush=True)
            next_at += gap
            time.sleep(max(0.0, next_at - time.monotonic()))
    print("done", written, flush=True)


if __name__ == "__main__":
    main()
