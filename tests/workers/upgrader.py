"""Upgrade a store at a given moment: after a file barrier, by `Store.open` or the `alembic`
command's own entry point.

    python upgrader.py MODE PATH BARRIER_DIR NAME

MODE is `store` (`Store.open`, which upgrades), `report` (`migrate.upgrade`, printing
`done changed=… raced=… backup=…` from its report) or `alembic` (`alembic.config.main`, what the
`alembic` console script runs, with `-c alembic.ini -x db=PATH upgrade head`). Everything is
imported first; then the process creates BARRIER_DIR/ready-NAME, waits for BARRIER_DIR/go and
upgrades. Logging goes to stderr at INFO, so the parent sees every migration step it ran.

On success it prints `done …`. If `Store.open` raises, it prints `error MODULE.CLASS SECONDS`
(seconds since the barrier opened) and exits with status 3; the `alembic` mode lets the error
end the process as the console script does (traceback on stderr, non-zero exit).
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import alembic.config

import harness_store.schema.migrate  # imported before the barrier
from harness_store import Store

INI = Path(__file__).resolve().parents[2] / "alembic.ini"


def main() -> None:
    mode, path, barrier, name = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(message)s")
    (barrier / f"ready-{name}").touch()
    while not (barrier / "go").exists():
        time.sleep(0.0005)
    began = time.monotonic()
    if mode == "store":
        try:
            store = Store.open(path)
        except Exception as exc:
            kind = f"{type(exc).__module__}.{type(exc).__name__}"
            print(f"error {kind} {time.monotonic() - began:.3f}", flush=True)
            print(str(exc).replace("\n", " "), flush=True)
            sys.exit(3)
        report = store.upgrade_report
        store.close()
        print(f"done store stamped={getattr(report, 'stamped', None)}", flush=True)
    elif mode == "report":
        report = harness_store.schema.migrate.upgrade(path)
        print(
            f"done changed={report.changed} raced={report.raced} backup={report.backup}",
            flush=True,
        )
    else:
        alembic.config.main(argv=["-c", str(INI), "-x", f"db={path}", "upgrade", "head"])
        print(f"done alembic {time.monotonic() - began:.3f}", flush=True)


if __name__ == "__main__":
    main()
