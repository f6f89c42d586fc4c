"""Write memory entries in a loop until killed, acknowledging each put on stdout.

    python memory_writer.py PATH RUN_ID SEED START

Put number i (from START on) is `put_for(SEED, i)`: a deterministic workspace, key and value,
with enough keys (more than 64) and long enough values (some over 2,000 characters, cut) that
most puts evict. Prints `ready`, then `i` after each `memory_put` returns.
"""

from __future__ import annotations

import random
import sys

from harness_store import Store

WORKSPACES = ("/work/ws-a", "/tmp/ünï 'ws' \"β\"; DROP TABLE memory;--")
KEYS = 90
LENGTHS = (5, 40, 300, 1200, 1990, 2000, 2001, 2600)


def put_for(seed: int, i: int) -> tuple[str, str, str]:
    """Put i: (workspace, key, intended value before truncation); the value starts `#i:`."""
    rng = random.Random(f"memory:{seed}:{i}")
    workspace = rng.choice(WORKSPACES)
    key = f"key {rng.randrange(KEYS)} '🦀'"
    length = rng.choice(LENGTHS)
    head = f"#{i}:"
    return workspace, key, (head + "vé🦀'\"" * length)[: max(length, len(head))]


def main() -> None:
    path, run_id, seed, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    store = Store.open(path, upgrade=False)
    print("ready", flush=True)
    i = start
    while i < 10**6:
        workspace, key, value = put_for(seed, i)
        store.memory_put(workspace, key, value, run_id, i % 1000)
        print(i, flush=True)
        i += 1


if __name__ == "__main__":
    main()
