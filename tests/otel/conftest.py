"""A real Arize Phoenix for the export tests: started once per session on 127.0.0.1 (free ports,
a temporary working directory, telemetry off), read back through its REST API.

Phoenix is found as the Python of `$HS_PHOENIX_PYTHON`, else `.venv-phoenix/bin/python` in the
checkout (`.ci/run` builds it), else this interpreter if it imports `phoenix`. Without one the
tests skip locally; under `CI=true` they fail instead.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
PHOENIX_ENV = "HS_PHOENIX_PYTHON"
STARTUP_SECS = 180.0

Span = dict[str, Any]


def phoenix_python() -> str | None:
    """The interpreter that can run Phoenix, or None."""
    named = os.environ.get(PHOENIX_ENV)
    if named:
        return named if Path(named).exists() else None
    local = REPO / ".venv-phoenix" / "bin" / "python"
    if local.exists():
        return str(local)
    probe = subprocess.run([sys.executable, "-c", "import phoenix.server.main"],
                           capture_output=True, check=False)  # fmt: skip
    return sys.executable if probe.returncode == 0 else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Phoenix:
    """A running Phoenix: its base URL, and its spans read back per project."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as response:
            return json.load(response)

    def spans(self, project: str) -> list[Span]:
        """Every span Phoenix holds for `project` (none when it has no such project yet)."""
        out: list[Span] = []
        cursor = ""
        while True:
            query = f"/v1/projects/{project}/spans?limit=1000" + (
                f"&cursor={cursor}" if cursor else ""
            )
            try:
                page = self.get(query)
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return []
                raise
            out.extend(page["data"])
            cursor = page.get("next_cursor") or ""
            if not cursor:
                return out

    def settled(self, project: str, expected: int, wait: float = 60.0) -> list[Span]:
        """The project's spans once Phoenix has stored `expected` of them (it inserts in the
        background), or what it has after `wait` seconds (then the test's comparison fails)."""
        deadline = time.monotonic() + wait
        spans = self.spans(project)
        while len(spans) < expected and time.monotonic() < deadline:
            time.sleep(0.5)
            spans = self.spans(project)
        time.sleep(1.0)  # anything beyond `expected` (a double) would be inserted by now
        return self.spans(project)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    """One Phoenix server for the whole session."""
    python = phoenix_python()
    if python is None:
        message = (f"Arize Phoenix is not installed: set {PHOENIX_ENV} to a Python that has "
                   "arize-phoenix, or build .venv-phoenix as .ci/run does")  # fmt: skip
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(free_port()),
           "PHOENIX_TELEMETRY_ENABLED": "false"}  # fmt: skip
    env.pop("PHOENIX_SQL_DATABASE_URL", None)
    log = work / "phoenix.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [python, "-m", "phoenix.server.main", "serve"], cwd=work, env=env,
            stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_SECS
    try:
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                pytest.fail(f"Phoenix did not start (exit {process.poll()}):\n{tail}")
            time.sleep(0.5)
        yield Phoenix(url, process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def project() -> str:
    """A Phoenix project of this test's own, so tests never see each other's spans."""
    return f"t-{uuid.uuid4().hex[:12]}"
