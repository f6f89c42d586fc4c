"""ORM sessions over a file Store: a session bound to `Store.write_engine` takes the write lock
when it begins, so a read-then-write waits for other writers instead of failing at once with
SQLite's busy-snapshot error (a deferred BEGIN cannot upgrade a stale read)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from sqlalchemy.orm import Session
from support.processes import wait_for_file

from harness_store import Store
from harness_store.models import Run

OTHER_WRITER = textwrap.dedent(
    """
    import sqlite3, sys
    from pathlib import Path
    conn = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
    conn.execute("UPDATE runs SET status = 'paused' WHERE id = 1")
    Path(sys.argv[2]).write_text("done")
    """
)


def test_an_orm_read_then_write_waits_for_another_process(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    done = tmp_path / "other.done"
    with Store.open(path) as store:
        run = store.start_run("goal", "out.txt")
        assert run == 1
        with Session(store.write_engine) as session, session.begin():
            found = session.get(Run, run)
            assert found is not None and found.status == "running"
            other = subprocess.Popen(
                [sys.executable, "-c", OTHER_WRITER, str(path), str(done)],
                stderr=subprocess.PIPE,
                text=True,
            )
            # The other writer must wait for this session; when it could commit meanwhile,
            # this session's read was stale and its write below would fail at once.
            wait_for_file(done, timeout=2.0)
            found.provider = "anthropic"
        _, err = other.communicate(timeout=60)
        assert other.returncode == 0, err
        assert store.provider(run) == "anthropic"
        assert store.status(run) == "paused"
