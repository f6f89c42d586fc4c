"""An export held open: `python parquet_exporter.py STORE DIR GO` starts `export_parquet`, prints
`exporting` at its first table, waits until the file GO exists (the parent's signal), then
finishes and prints `done`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from harness_store import Store
from harness_store.analytics import export_parquet

if __name__ == "__main__":
    store_path, directory, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    held = False

    def hold(table: str, done: int, total: int, rows: int) -> None:
        global held
        if held:
            return
        held = True
        print("exporting", flush=True)
        deadline = time.monotonic() + 300
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.01)

    with Store.open(store_path, read_only=True) as store:
        export_parquet(store, directory, progress=hold)
    print("done", flush=True)
