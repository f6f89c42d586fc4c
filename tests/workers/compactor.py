"""Compact a store a few pages a slice, for a kill between slices.

    python compactor.py PATH PAGES

Prints `ready` once the store is open, then compacts it (`Store.compact(slice_pages=PAGES)`)
and prints `done`.
"""

from __future__ import annotations

import sys

from harness_store import Store


def main() -> None:
    path, pages = sys.argv[1], int(sys.argv[2])
    with Store.open(path, upgrade=False, backup=False) as store:
        print("ready", flush=True)
        store.compact(slice_pages=pages)
    print("done", flush=True)


if __name__ == "__main__":
    main()
