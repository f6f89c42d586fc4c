"""The package as a pip user meets it: a wheel installed into a fresh virtualenv, used from an
empty directory with no checkout anywhere in sight.

The wheel is built from this checkout; the fresh venv has no system site-packages, gets the
wheel by `pip install --no-deps --no-index`, and sees the dependencies (SQLAlchemy, Alembic,
…) through a path file naming the test venv's site-packages, so the test runs offline.
"""

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


def run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HARNESS_STORE_URL")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with only the built wheel installed (dependencies borrowed, see above)."""
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    built = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)],
        cwd=base,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("harness_store-*.whl")
    venv = base / "venv"
    made = run([sys.executable, "-m", "venv", str(venv)], cwd=base)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], base)
    deps = sysconfig.get_path("purelib")
    Path(site.stdout.strip(), "deps-from-test-venv.pth").write_text(deps + "\n")
    installed = run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], base
    )
    assert installed.returncode == 0, installed.stderr
    where = run([str(python), "-c", "import harness_store; print(harness_store.__file__)"], base)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr
    return venv


def revision(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("SELECT version_num FROM alembic_version").fetchone()[0])
    finally:
        conn.close()


def test_alembic_with_a_two_line_ini(fresh_venv: Path, tmp_path: Path) -> None:
    (tmp_path / "alembic.ini").write_text("[alembic]\nscript_location = harness_store:migrations\n")
    done = run([str(fresh_venv / "bin" / "python"), "-m", "alembic", "upgrade", "head"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert revision(tmp_path / "runs.sqlite3") == HEAD
    named = tmp_path / "named.sqlite3"
    python = str(fresh_venv / "bin" / "python")
    done = run([python, "-m", "alembic", "-x", f"db={named}", "upgrade", "head"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert revision(named) == HEAD


def test_alembic_with_pyproject_toml_and_no_ini(fresh_venv: Path, tmp_path: Path) -> None:
    """Without any alembic.ini, Alembic reads `[tool.alembic]` from pyproject.toml."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.alembic]\nscript_location = "harness_store:migrations"\n'
    )
    done = run([str(fresh_venv / "bin" / "python"), "-m", "alembic", "upgrade", "head"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert revision(tmp_path / "runs.sqlite3") == HEAD


def test_package_upgrade_creates_a_store(fresh_venv: Path, tmp_path: Path) -> None:
    """The package's own API creates a store where none exists (what `harness-store upgrade`
    calls)."""
    target = tmp_path / "new" / "runs.sqlite3"
    target.parent.mkdir()
    code = (
        "import sys; from harness_store.schema import migrate; "
        "r = migrate.upgrade(sys.argv[1]); print(r.after, r.changed)"
    )
    done = run([str(fresh_venv / "bin" / "python"), "-c", code, str(target)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [HEAD, "True"]
    assert revision(target) == HEAD


def test_harness_store_upgrade_creates_a_store(fresh_venv: Path, tmp_path: Path) -> None:
    target = tmp_path / "runs.sqlite3"
    done = run([str(fresh_venv / "bin" / "harness-store"), "upgrade", str(target)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert revision(target) == HEAD


def test_every_package_of_the_source_is_in_the_wheel(fresh_venv: Path) -> None:
    """A package left out of pyproject's list installs nothing, and only a wheel shows it."""
    source = REPO / "harness_store"
    wanted = sorted(
        ".".join(("harness_store", *p.parent.relative_to(source).parts))
        for p in source.rglob("__init__.py")
    )
    python = fresh_venv / "bin" / "python"
    probe = "import importlib, sys; [importlib.import_module(n) for n in sys.argv[1:]]"
    done = run([str(python), "-c", probe, *wanted], cwd=fresh_venv)
    assert done.returncode == 0, done.stderr
