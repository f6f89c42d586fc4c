"""A prune to kill: `python retention_pruner.py TARGET ARCHIVE BATCH_ROWS` prunes every finished
run tree into ARCHIVE in batches of about BATCH_ROWS rows, printing `batch DONE TOTAL` after
each batch committed, then `done`."""

from __future__ import annotations

import sys

from harness_store import Store

if __name__ == "__main__":
    target, archive, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Store.open(target, backup=False) as store:
        store.prune_runs(
            before="9999-01-01",
            archive=archive,
            batch_rows=rows,
            progress=lambda done, total: print(f"batch {done} {total}", flush=True),
        )
    print("done", flush=True)
