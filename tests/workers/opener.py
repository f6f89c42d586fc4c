"""Open (and so upgrade) a store with `Store.open`, saying when it starts and when it is done.

    python opener.py PATH [backup|no-backup]

Everything is imported first (Alembic too), then `go` is printed just before `Store.open`, so a
parent can aim a kill at the upgrade itself; `opened REVISION` follows once it returns.
"""

from __future__ import annotations

import sys

import harness_store.schema.migrate  # noqa: F401  (imported up front: the kill window is the upgrade)
from harness_store import Store


def main() -> None:
    path = sys.argv[1]
    backup = not (len(sys.argv) > 2 and sys.argv[2] == "no-backup")
    print("go", flush=True)
    store = Store.open(path, backup=backup)
    report = store.upgrade_report
    after = getattr(report, "after", None)
    store.close()
    print(f"opened {after}", flush=True)


if __name__ == "__main__":
    main()
