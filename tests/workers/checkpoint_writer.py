"""Checkpoint steps of one run in a loop until killed, acknowledging each on stdout.

    python checkpoint_writer.py PATH RUN_ID [SYNCHRONOUS]

Resumes like io-harness does: the next step is `last_step(run_id) + 1`. Prints `ready N` (N =
the step it resumes after) once the store is open, then each step number only AFTER
`checkpoint_step` has returned (committed), flushing every line.
"""

from __future__ import annotations

import sys

from harness_store import StepRecord, Store


def step_record(step: int) -> StepRecord:
    """Step `step`'s row: deterministic, of varying size, with awkward text."""
    body = "x'\"; -- é🦀\n" * (step * 37 % 300)
    return StepRecord(
        step,
        f"decision {step}",
        f"result {step} {body}",
        f"prompt {step}",
        '{"tool": "write_file"}',
        step,
    )


def main() -> None:
    path, run_id = sys.argv[1], int(sys.argv[2])
    synchronous = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "default" else None
    store = Store.open(path, upgrade=False, synchronous=synchronous)
    step = store.last_step(run_id)
    print(f"ready {step}", flush=True)
    while step < 10**6:
        step += 1
        store.checkpoint_step(run_id, step_record(step))
        print(step, flush=True)


if __name__ == "__main__":
    main()
