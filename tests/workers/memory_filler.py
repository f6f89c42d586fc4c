"""Put COUNT fresh keys into one workspace as fast as possible, printing what each put evicted.

    python memory_filler.py TARGET RUN_ID WORKER COUNT

Keys are `w{WORKER}-{i}`, never reused, so every key ever put ends either in the workspace or
in exactly one caller's eviction list. Prints `ready`, waits for a line on stdin, then one JSON
list per put.
"""

from __future__ import annotations

import json
import sys

from harness_store import Store


def main() -> None:
    target, run_id, worker, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    with Store.open(target, upgrade=False) as store:
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(count):
            evicted = store.memory_put("/ws/shared", f"w{worker}-{i}", "v" * 10, run_id, i)
            print(json.dumps(evicted), flush=True)


if __name__ == "__main__":
    main()
