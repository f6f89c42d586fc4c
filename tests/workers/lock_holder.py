"""Hold a store's write lock: `BEGIN IMMEDIATE`, write a row, sleep, roll back.

    python lock_holder.py PATH SECONDS

Prints `locked` once the lock is held; after SECONDS rolls back (the row is never committed)
and prints `released`.
"""

from __future__ import annotations

import sqlite3
import sys
import time


def main() -> None:
    path, seconds = sys.argv[1], float(sys.argv[2])
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO runs (goal, file) VALUES ('held by lock_holder', 'lock.txt')")
    print("locked", flush=True)
    time.sleep(seconds)
    conn.execute("ROLLBACK")
    conn.close()
    print("released", flush=True)


if __name__ == "__main__":
    main()
