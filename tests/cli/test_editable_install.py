"""The two-line `alembic.ini` of the README works after an editable install (`pip install -e
.`) too, run from another directory: the chain is importable as `harness_store.migrations` in
the checkout as in a wheel. The fresh venv borrows the test venv's dependencies through a path
file, as `tests/install/test_wheel.py` does (pip's build isolation still fetches the build backend
from the configured index)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from harness_store.releases import HEAD

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HARNESS_STORE_URL")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_two_line_ini_after_an_editable_install(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    # no pip or setuptools of its own: the test venv's (new enough for this pyproject) serve
    assert run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path).returncode == 0
    python = str(venv / "bin" / "python")
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp_path)
    Path(site.stdout.strip(), "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    installed = run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "-e", str(REPO)],
        tmp_path,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = run([python, "-c", "import harness_store; print(harness_store.__file__)"], elsewhere)
    assert where.stdout.strip().startswith(str(REPO)), where.stdout + where.stderr
    (elsewhere / "alembic.ini").write_text(
        "[alembic]\nscript_location = harness_store:migrations\n"
    )
    done = run([python, "-m", "alembic", "upgrade", "head"], elsewhere)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(elsewhere / "runs.sqlite3") as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == HEAD
