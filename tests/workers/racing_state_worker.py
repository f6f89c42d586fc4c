"""One of several real processes racing on the 0.66 API; waits for `go` on stdin, then prints
one JSON line per call.

    python racing_state_worker.py memory TARGET RUN_ID WORKER COUNT    (memory_write_with capped)
    python racing_state_worker.py head TARGET SESSION_ID WORKER COUNT  (compare-and-set head moves)
    python racing_state_worker.py dequeue TARGET PARENT_RUN_ID COUNT   (every queued goal it can)
"""

from __future__ import annotations

import json
import sys

from harness_store import HeadConflictError, MemoryLimits, Store

LIMITS = MemoryLimits(max_entries=8, max_chars=300, max_entry_chars=60)
WORKSPACE = "/ws/raced"


def main() -> None:
    mode, target, owner = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = Store.open(target, upgrade=False)
    print("ready", flush=True)
    sys.stdin.readline()
    if mode == "memory":
        worker, count = int(sys.argv[4]), int(sys.argv[5])
        for i in range(count):
            value = f"w{worker}-{i}:" + "x" * ((i * 7 + worker * 13) % 70)
            wrote = store.memory_write_with(
                WORKSPACE, f"w{worker}-{i}", value, owner, i, "fact", LIMITS
            )
            if i % 5 == 0:
                store.record_memory_recall(owner + worker, i, WORKSPACE, [f"w{worker}-{i}"])
            print(json.dumps(wrote.evicted), flush=True)
    elif mode == "head":
        worker, count = int(sys.argv[4]), int(sys.argv[5])
        for i in range(count):
            head = store.session_head(owner)
            turn = store.record_turn(owner, head, worker, f"w{worker}-{i}")
            try:
                store.set_session_head_if(owner, head, turn)
                print(json.dumps([head, turn]), flush=True)
            except HeadConflictError:
                print(json.dumps(None), flush=True)
    else:
        for i in range(int(sys.argv[4])):
            if store.dequeue_agent(owner, i, f"goal {i}"):
                print(json.dumps(i), flush=True)
    store.close()


if __name__ == "__main__":
    main()
