"""A second process for the retention races: it writes on runs while a prune runs.

`python retention_worker.py resume TARGET PAUSE BELOW RUN...` waits until the store holds
fewer than BELOW runs (the prune has deleted its first unit), then takes each run in the order
given and, in one transaction, sets it `running` and takes its lease (600 s), as a resuming
driver does. It prints `resumed N` once that committed, or `gone N` when the run was already
deleted (the Store says `RunNotFoundError`), flushing each line.

`python retention_worker.py calls TARGET RUN...` records, turn about, a provider call (model
`mN`) and a policy event (target `tN`) on one of the five lowest of the RUNs still in the
store (those a prune is about to take), printing `call N` or `event N` once each returned
(committed), until none of the RUNs is left or 120 s passed.

`python retention_worker.py children TARGET RUN...` starts a child under the lowest RUN still in
the store each time the prune took the one before (each RUN once), then reads that parent's
status: it prints `child C PARENT seen` when
the parent was still there after the child committed, `child C PARENT gone` otherwise.
"""

from __future__ import annotations

import sys
import time

from harness_store import Store
from harness_store.errors import RunNotFoundError
from harness_store.records import PolicyEvent, ProviderCall


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


def write(target: str, runs: list[int], mode: str) -> None:
    with Store.open(target, backup=False) as store:
        print("ready", flush=True)
        deadline = time.monotonic() + 120
        n = 0
        left = sorted(runs)
        waiting = None
        while left and time.monotonic() < deadline:
            if mode == "children" or n % 10 == 0:
                present = set(store.runs())
                left = [r for r in left if r in present]
                if not left:
                    break
            n += 1
            if mode == "children":
                if left[0] == waiting:  # one child each time the prune took the lowest root
                    time.sleep(0.001)
                    continue
                run = left.pop(0)  # in use from now on: the next child goes under another
                waiting = left[0] if left else None
                child = store.start_child_run(f"child {n}", "plan.toml", run, 1)
                seen = "seen" if store.status(run) is not None else "gone"
                print(f"child {child} {run} {seen}", flush=True)
                continue
            run = left[n % min(5, len(left))]
            if n % 2:
                store.record_provider_call(run, ProviderCall(1, n, "worker", f"m{n}"))
                print(f"call {n}", flush=True)
            else:
                store.record_event(run, PolicyEvent(1, "refusal", "exec", f"t{n}"))
                print(f"event {n}", flush=True)


if __name__ == "__main__":
    mode, target, *rest = sys.argv[1:]
    if mode == "resume":
        pause, below, *runs = rest
        resume(target, [int(r) for r in runs], float(pause), int(below))
    else:
        assert mode in ("calls", "children"), mode
        write(target, [int(r) for r in rest], mode)
