"""Write runs as io-harness does while an export follows the store, acknowledging each.

    python otel_run_writer.py TARGET RUNS LEFT_RUNNING...

Finishes each run of LEFT_RUNNING (runs the test left running before the follow began), then
writes RUNS runs: each has a step with a tool call and a provider call and is finished; every
third is a child of the run before it. Even rounds write no `run_events` at all (as the Store's
own `start_run`/`finish_run`); odd ones write a `step_started` event before finishing and a
`finished` event after, as io-harness's loop does. Last comes a sentinel run, finished with an
event. Prints `ready`, `finished RUN_ID` per run, and `sentinel RUN_ID`.
"""

from __future__ import annotations

import sys

from harness_store import StepRecord, Store
from harness_store.records import ProviderCall, RunEvent, Usage


def write(store: Store, run: int, i: int) -> None:
    store.checkpoint_step(
        run,
        StepRecord.new(1, "read", f"contents {i}").with_trace(
            f"prompt {i}", f'read_file:{{"path":"f{i}.txt"}}', 10
        ),
    )
    usage = Usage(prompt_tokens=100, completion_tokens=10, total_tokens=110)
    store.record_provider_call(
        run, ProviderCall(step=1, attempt=1, provider="anthropic", model="m", usage=usage)
    )


def main() -> None:
    target, runs, left = sys.argv[1], int(sys.argv[2]), [int(a) for a in sys.argv[3:]]
    with Store.open(target, upgrade=False) as store:
        print("ready", flush=True)
        for run in left:
            store.finish_run(run, "success")
            print(f"finished {run}", flush=True)
        previous = None
        for i in range(runs):
            if i % 3 == 2 and previous is not None:
                run = store.start_child_run(f"child {i}", "/repo", previous, 1)
            else:
                run = store.start_run(f"round {i}", "/repo")
            write(store, run, i)
            if i % 2:
                store.put_event(RunEvent(run, 1, "step_started"))
            store.finish_run(run, "success")
            if i % 2:
                store.put_event(RunEvent(run, 1, "finished"))
            print(f"finished {run}", flush=True)
            previous = run
        sentinel = store.start_run("sentinel", "/repo")
        store.put_event(RunEvent(sentinel, 1, "step_started"))
        store.finish_run(sentinel, "success")
        store.put_event(RunEvent(sentinel, 1, "finished"))
        print(f"sentinel {sentinel}", flush=True)


if __name__ == "__main__":
    main()
