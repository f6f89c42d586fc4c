"""Grow run trees and record provider calls in a loop until killed, each write acknowledged.

    python tree_writer.py TARGET

Each round starts a root run, a child under it and a provider call of each (so hs3's spend
counters move with every round). Prints `ready`, then `i ROOT CHILD` after each round.
"""

from __future__ import annotations

import sys

from harness_store import Store
from harness_store.records import ProviderCall, Usage


def main() -> None:
    store = Store.open(sys.argv[1], upgrade=False)
    print("ready", flush=True)
    for i in range(10**6):
        root = store.start_run(f"root {i}", "root.txt")
        child = store.start_child_run(f"child {i}", "child.txt", root, 1)
        for run in (root, child):
            usage = Usage(prompt_tokens=10, completion_tokens=4)
            store.record_provider_call(run, ProviderCall(1, 0, "prov", f"m{i % 3}", usage))
        print(f"{i} {root} {child}", flush=True)


if __name__ == "__main__":
    main()
