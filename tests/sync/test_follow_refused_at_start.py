"""`sync --follow` into a centre that refuses the follower's role at its start ends with one
line and exit 1, as the sync guide says, whether the role is named in the URL or by libpq's
`PGUSER`; it is no outage to wait out."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from support.clirun import run_cli
from support.synccheck import write_source


@pytest.mark.parametrize("spelled", ["url", "PGUSER"])
def test_a_role_the_centre_does_not_know_ends_the_follower(
    pg_url: str, tmp_path: Path, spelled: str
) -> None:
    source = tmp_path / "host.sqlite3"
    write_source(source, runs=1, steps=1, tag="h")
    nobody = f"hs_test_nobody_{uuid.uuid4().hex[:8]}"
    url = make_url(pg_url)
    env: dict[str, str] = {}
    if spelled == "url":
        dest = url.set(username=nobody).render_as_string(hide_password=False)
    else:
        dest = url._replace(username=None).render_as_string(hide_password=False)
        env["PGUSER"] = nobody
    done = run_cli("sync", source, dest, "--follow", "--json", env=env, timeout=120)
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and nobody in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.count("waiting") <= 1
