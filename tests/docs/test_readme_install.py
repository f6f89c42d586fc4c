"""The README's install commands, run verbatim as a newcomer runs them: in a copy of the
checkout, a fresh venv, `pip install .`, then `harness-store upgrade runs.sqlite3`."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from harness_store.releases import HEAD

from .examples import REPO, blocks

LEFT_OUT = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.egg-info", "build", "dist", "site", ".*_cache"
)


def install_commands() -> str:
    """The first shell block of the README's "Install" section."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    shell = [b for b in blocks(section) if b.lang == "sh"]
    assert shell, "the README's Install section has no shell block"
    return shell[0].code


def test_the_install_block_is_the_two_commands() -> None:
    commands = [line for line in install_commands().splitlines() if line.strip()]
    assert len(commands) == 2
    assert "pip install ." in commands[0]
    assert commands[1].startswith("harness-store upgrade runs.sqlite3")


@pytest.mark.slow
def test_the_readme_install_commands_work_in_a_fresh_clone(tmp_path: Path) -> None:
    clone = tmp_path / "harness_store"
    shutil.copytree(REPO, clone, ignore=LEFT_OUT, symlinks=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(REPO))
    )
    done = subprocess.run(
        ["bash", "-e", "-c", install_commands()],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert (clone / ".venv" / "bin" / "harness-store").is_file()
    store = clone / "runs.sqlite3"
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as conn:
        (revision,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    assert revision == HEAD
    assert f"now at {HEAD}" in done.stdout
