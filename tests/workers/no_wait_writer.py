"""Write as io-harness does but never wait for the lock: any moment another connection holds
the store's write lock fails a write at once, and is counted.

    python no_wait_writer.py PATH SECONDS

Prints `ready`, waits for a line on stdin, then writes a step per loop for SECONDS and prints
one JSON line: calls made and calls refused for the lock.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time


def main() -> None:
    path, seconds = sys.argv[1], float(sys.argv[2])
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    run = conn.execute("INSERT INTO runs (goal, file) VALUES ('no wait', 'out.txt')").lastrowid
    conn.execute("COMMIT")
    print("ready", flush=True)
    sys.stdin.readline()
    calls = locked = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        calls += 1
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            locked += 1
            continue
        conn.execute(
            "INSERT INTO steps (run_id, step, decision, result, tokens) VALUES (?, ?, 'd', 'r', 1)",
            (run, calls),
        )
        conn.execute("COMMIT")
    print(json.dumps({"calls": calls, "locked": locked}), flush=True)


if __name__ == "__main__":
    main()
