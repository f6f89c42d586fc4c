"""Overwrite one memory key in a loop until killed, acknowledging each put on stdout.

    python pinned_writer.py TARGET RUN_ID WORKSPACE KEY

Put i writes `RUN_ID:i` to KEY as run RUN_ID, step i. Prints `ready`, then `i` after each
`memory_put` returns (whether upstream's pin guard let it write or not). A put that waited past
the busy timeout (a starved SQLite writer on a loaded machine) is tried again: lock fairness is
not what this worker is for.
"""

from __future__ import annotations

import sys

from harness_store import Store
from harness_store.errors import StoreLockedError


def main() -> None:
    target, run_id, workspace, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    store = Store.open(target, upgrade=False)
    print("ready", flush=True)
    i = 1
    while i < 10**6:
        try:
            store.memory_put(workspace, key, f"{run_id}:{i}", run_id, i)
        except StoreLockedError:
            continue
        print(i, flush=True)
        i += 1


if __name__ == "__main__":
    main()
