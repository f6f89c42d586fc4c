"""Start, checkpoint and finish runs in a loop until killed, acknowledging each finish.

    python finisher.py PATH SEED START

Round i (from START on) starts run `round i`, checkpoints a few steps in one transaction and
finishes it with `plan_for(SEED, i)`'s outcome; a run paused `awaiting_approval` is then
finished again with `success` (as a resume after approval would). Prints `ready`, then
`i RUN_ID OUTCOME` after each `finish_run` returns.
"""

from __future__ import annotations

import random
import sys

from harness_store import StepRecord, Store

OUTCOMES = ("success", "awaiting_approval", "step_cap_reached", "stalled", "verify_failed")


def plan_for(seed: int, i: int) -> tuple[int, str]:
    """Round i: (number of steps, outcome)."""
    rng = random.Random(f"finish:{seed}:{i}")
    return rng.randrange(4), rng.choice(OUTCOMES)


def main() -> None:
    path, seed, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = Store.open(path, upgrade=False)
    print("ready", flush=True)
    i = start
    while i < 10**6:
        steps, outcome = plan_for(seed, i)
        run = store.start_run(f"round {i}", f"file {i}.txt")
        store.checkpoint_steps(
            run,
            [StepRecord(n, "act", f"ok {n}", "", "", 10 * n + 1) for n in range(1, steps + 1)],
        )
        store.finish_run(run, outcome)
        print(f"{i} {run} {outcome}", flush=True)
        if outcome == "awaiting_approval":  # approved: resumed and finished for good
            store.finish_run(run, "success")
            print(f"{i} {run} success", flush=True)
        i += 1


if __name__ == "__main__":
    main()
