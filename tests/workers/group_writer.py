"""Threads of one process writing through one Store at once, until killed.

    python group_writer.py PATH THREADS [GROUP INSERT]

Each thread owns one run (started first; their ids are printed as `runs ID …`) and writes in
a tight loop, alternately one `checkpoint_step` and a `checkpoint_steps` of three steps, with
step numbers counting up from 1. Prints `writing` once every thread has committed at least one
call, so the parent kills the process while groups are being committed.

Given GROUP and INSERT, each thread also prints `done RUN STEP` once a call has returned (its
last step), and the process kills itself (SIGKILL) from inside a group: when the Store's
connection starts the INSERT-th row statement after the GROUP-th batch savepoint (a savepoint
is only taken for a transaction of two callers or more) — or, INSERT 0, when it starts that
group's COMMIT — it prints `dying` and dies, with the group's transaction half run or whole
but not committed.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from harness_store import StepRecord, Store


def record(n: int) -> StepRecord:
    return StepRecord(n, "act", "ok", "p" * 200, "{}", 1)


def say(line: str) -> None:
    """One line in one `write` (threads' lines never interleave; `print` writes twice)."""
    os.write(1, f"{line}\n".encode())


def main() -> None:
    path, threads = sys.argv[1], int(sys.argv[2])
    die = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else None
    store = Store.open(path, upgrade=False, synchronous="full")
    runs = [store.start_run(f"agent {k}", "out.txt") for k in range(threads)]
    say("runs " + " ".join(map(str, runs)))
    started = threading.Barrier(threads + 1)
    report = die is not None
    if die is not None:
        seen = {"groups": 0, "rows": 0}

        def trace(sql: str) -> None:
            if sql.startswith("SAVEPOINT hs_batch"):
                seen["groups"] += 1
                seen["rows"] = 0
            elif seen["groups"] >= die[0] and (
                sql == "COMMIT" if die[1] == 0 else sql.startswith("INSERT")
            ):
                seen["rows"] += 1
                if seen["rows"] >= die[1]:
                    say("dying")
                    os.kill(os.getpid(), signal.SIGKILL)

        store._raw.set_trace_callback(trace)

    def write(run: int) -> None:
        n = 0
        first = True
        while True:
            store.checkpoint_step(run, record(n + 1))
            if report:
                say(f"done {run} {n + 1}")
            store.checkpoint_steps(run, [record(n + 2), record(n + 3), record(n + 4)])
            n += 4
            if report:
                say(f"done {run} {n}")
            if first:
                first = False
                started.wait()

    for run in runs:
        threading.Thread(target=write, args=(run,), daemon=True).start()
    started.wait()
    say("writing")
    threading.Event().wait()


if __name__ == "__main__":
    main()
