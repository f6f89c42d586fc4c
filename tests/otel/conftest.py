"""The real receivers of the export tests, each started once per session on 127.0.0.1 (free
ports, a temporary working directory, telemetry off): Arize Phoenix, read back through its REST
API, and MLflow's tracking server (a temporary SQLite backend store), read back through MLflow's
own Python client (`mlflow_spans.py`, run by MLflow's Python).

Phoenix is found as the Python of `$HS_PHOENIX_PYTHON`, else `.venv-phoenix/bin/python` in the
checkout (`.ci/run` builds it), else this interpreter if it imports `phoenix`; MLflow likewise
through `$HS_MLFLOW_PYTHON` and `.venv-mlflow`. Without one the tests skip locally; under
`CI=true` they fail instead.
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
from support.provided import unavailable

REPO = Path(__file__).resolve().parents[2]
PHOENIX_ENV = "HS_PHOENIX_PYTHON"
MLFLOW_ENV = "HS_MLFLOW_PYTHON"
STARTUP_SECS = 300.0

Span = dict[str, Any]


def receiver_python(variable: str, venv: str, module: str) -> str | None:
    """The interpreter that can run a receiver: `$variable`, else the checkout's `venv`, else
    this one if it imports `module`; None when there is none."""
    named = os.environ.get(variable)
    if named:
        return named if Path(named).exists() else None
    local = REPO / venv / "bin" / "python"
    if local.exists():
        return str(local)
    probe = subprocess.run([sys.executable, "-c", f"import {module}"],
                           capture_output=True, check=False)  # fmt: skip
    return sys.executable if probe.returncode == 0 else None


def phoenix_python() -> str | None:
    """The interpreter that can run Phoenix, or None."""
    return receiver_python(PHOENIX_ENV, ".venv-phoenix", "phoenix.server.main")


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
        unavailable(f"Arize Phoenix is not installed: set {PHOENIX_ENV} to a Python that has "
                "arize-phoenix, or build .venv-phoenix as .ci/run does")  # fmt: skip
        return
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
        stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
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


@dataclass
class Mlflow:
    """A running MLflow tracking server: its base URL, and its spans read back per experiment
    by MLflow's own client."""

    url: str
    python: str
    work: Path

    def post(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            self.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)

    def experiment(self) -> str:
        """A new experiment of the calling test's own: its id."""
        created = self.post("/api/2.0/mlflow/experiments/create", {"name": uuid.uuid4().hex})
        return str(created["experiment_id"])

    def spans(self, experiment: str) -> list[Span]:
        """Every span MLflow holds for `experiment` (see `mlflow_spans.py` for the shape)."""
        done = subprocess.run(
            [self.python, str(Path(__file__).with_name("mlflow_spans.py")), experiment],
            capture_output=True, text=True, timeout=300, check=False, cwd=self.work,
            env={**os.environ, "MLFLOW_TRACKING_URI": self.url, **QUIET_MLFLOW},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        spans: list[Span] = json.loads(done.stdout)
        return spans

    def settled(self, experiment: str, expected: int, wait: float = 120.0) -> list[Span]:
        """The experiment's spans once MLflow holds `expected` of them, or what it has after
        `wait` seconds (then the test's comparison fails)."""
        deadline = time.monotonic() + wait
        spans = self.spans(experiment)
        while len(spans) < expected and time.monotonic() < deadline:
            time.sleep(1.0)
            spans = self.spans(experiment)
        return spans


QUIET_MLFLOW = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}


def _mlflow_healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@pytest.fixture(scope="session")
def mlflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mlflow]:
    """One MLflow tracking server for the whole session, on a temporary SQLite backend store."""
    python = receiver_python(MLFLOW_ENV, ".venv-mlflow", "mlflow.server")
    if python is None:
        unavailable(f"MLflow is not installed: set {MLFLOW_ENV} to a Python that has mlflow, or "
                "build .venv-mlflow as .ci/run does")  # fmt: skip
        return
    work = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    log = work / "mlflow.log"
    command = [python, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
               "--workers", "1", "--backend-store-uri", f"sqlite:///{work / 'mlflow.db'}",
               "--default-artifact-root", str(work / "artifacts")]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=work, stdout=sink, stderr=subprocess.STDOUT,
                                   env={**os.environ, **QUIET_MLFLOW})  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_SECS
    try:
        while not _mlflow_healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                pytest.fail(f"MLflow did not start (exit {process.poll()}):\n{tail}")
            time.sleep(0.5)
        yield Mlflow(url, python, work)
    finally:
        stop(process)
