"""A green run means every test ran: what CI provides (PostgreSQL, the shared fixtures, the
oracles, the receivers) is asked for through `support.provided`, which fails a test under
`CI=true` where it would skip locally; and a per-test timeout fails a hung test instead of
holding the run until CI's limit."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from support import provided

TESTS = Path(__file__).resolve().parent


def test_unavailable_skips_here_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="no server"):
        provided.unavailable("no server")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run this test, but no server"):
        provided.unavailable("no server")


def test_no_test_catches_a_skip_to_pass_instead() -> None:
    """`except pytest.skip.Exception: return` turns a comparison never made into a pass."""
    catching = []
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            handler = isinstance(node, ast.ExceptHandler) and node.type is not None
            if handler and ast.unparse(node.type).endswith("skip.Exception"):  # type: ignore[attr-defined]
                catching.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert catching == []


def test_what_ci_provides_is_asked_for_in_one_place() -> None:
    """A skip that names PostgreSQL, a fixture, an oracle or a receiver goes through
    `provided.unavailable` (which CI turns into a failure), never `pytest.skip` directly."""
    provisions = ("PG_SKIP", "fixture", "oracle", "Phoenix", "MLflow", "not installed")
    direct = []
    for path in TESTS.rglob("*.py"):
        if path.name == "provided.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "pytest.skip":
                said = ast.unparse(node)
                if any(word in said for word in provisions):
                    direct.append(f"{path.relative_to(TESTS)}:{node.lineno}: {said}")
    assert direct == []


def test_a_hung_test_fails_on_the_suites_timeout(tmp_path: Path) -> None:
    """The suite's `timeout` (pytest-timeout) is in force and ends a test that hangs."""
    (tmp_path / "test_hangs.py").write_text(
        "import time\n\ndef test_hangs():\n    time.sleep(60)\n", encoding="utf-8"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 2\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_hangs.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 1, done.stdout
    assert "Timeout" in done.stdout


def test_the_suite_sets_a_timeout(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.hasplugin("timeout")
    assert 0 < float(pytestconfig.getini("timeout")) <= 1800
