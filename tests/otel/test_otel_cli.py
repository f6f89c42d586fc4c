"""`harness-store export otlp` run as a user runs it against a real Phoenix: the export and a
refusing or unreachable receiver (the command in this process, as `main` runs it), `--follow`
in a process of its own on a store another process writes, and a central PostgreSQL store
synced from two SQLite stores."""

from __future__ import annotations

import hashlib
import logging
import signal
from pathlib import Path

from support.clirun import COMMAND, run_in_process
from support.processes import Worker

from harness_store import Store
from harness_store.otel import export
from harness_store.records import RunEvent, StepRecord
from harness_store.sync import sync

from .conftest import Phoenix, free_port
from .test_otel_phoenix import assert_matches_store, by_operation
from .trees import build_tree, write_run

SECRET = "Bearer hs-very-secret-token"


def fingerprint(path: Path) -> tuple[str, dict[str, int]]:
    """The store file's bytes and its row counts: what "unchanged" means here."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with Store.open(path, read_only=True) as store:
        runs = store.runs()
        counts = {"runs": len(runs), "steps": sum(len(store.steps(r)) for r in runs)}
    return digest, counts


def test_cli_export_reaches_phoenix(tmp_path: Path, phoenix: Phoenix, project: str) -> None:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        build_tree(store)
    before = fingerprint(path)
    done = run_in_process("export", "otlp", str(path), "--endpoint", phoenix.url,
                          "--project", project, "--header", f"Authorization={SECRET}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("sent 22 spans of 4 runs (9 chat, 9 tool) to http://127.0.0.1")
    spans = phoenix.settled(project, 22)
    with Store.open(path, read_only=True) as store:
        assert_matches_store(store, spans)
    assert fingerprint(path) == before


def test_unreachable_receiver_is_one_line_with_the_url(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        build_tree(store)
    before = fingerprint(path)
    url = f"http://127.0.0.1:{free_port()}"
    done = run_in_process("export", "otlp", str(path), "--endpoint", url, "--timeout", "2",
                          "--header", f"Authorization={SECRET}")  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith(f"harness-store: error: cannot reach the OTLP receiver at {url}")
    assert done.stderr.count("\n") == 1
    assert "secret" not in done.stderr + done.stdout and "Traceback" not in done.stderr
    assert fingerprint(path) == before


def test_the_command_leaves_a_callers_logging_as_it_found_it(tmp_path: Path) -> None:
    """The command quiets the OTLP exporter's own log lines (it reports delivery itself) only
    while it runs: a program calling `main` keeps its logging as it was."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        build_tree(store)
    exporter = logging.getLogger("opentelemetry.exporter.otlp.proto.http")
    exporter.setLevel(logging.INFO)
    try:
        url = f"http://127.0.0.1:{free_port()}"
        done = run_in_process("export", "otlp", str(path), "--endpoint", url, "--timeout", "2")
        assert done.returncode == 1, done.stderr
        assert exporter.level == logging.INFO
    finally:
        exporter.setLevel(logging.NOTSET)


def test_refusing_receiver_names_the_url_and_status(tmp_path: Path, phoenix: Phoenix) -> None:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        build_tree(store)
    before = fingerprint(path)
    url = phoenix.url + "/v1/no-such-endpoint"
    done = run_in_process("export", "otlp", str(path), "--endpoint", url, "--timeout", "5",
                          "--header", f"Authorization={SECRET}")  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"harness-store: error: the OTLP receiver at {url} refused the spans: HTTP 4"
    ), done.stderr
    assert "secret" not in done.stderr and "Traceback" not in done.stderr
    assert fingerprint(path) == before


def test_bad_arguments_are_usage_errors(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    Store.open(path).close()
    for args in (["--endpoint", "ftp://x"], ["--endpoint", "http://h", "--since", "soon"],
                 ["--endpoint", "http://h", "--header", "novalue"]):  # fmt: skip
        done = run_in_process("export", "otlp", str(path), *args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("harness-store: error: ")


def test_follow_ships_runs_as_they_finish(tmp_path: Path, phoenix: Phoenix, project: str) -> None:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        done_before = store.start_run("already done", "/repo")
        write_run(store, done_before, 1, "m-1")
        store.finish_run(done_before, "success")
        live = store.start_run("still going when the export starts", "/repo")
        store.put_event(RunEvent(live, 1, "step_started"))
    follower = Worker([*COMMAND, "export", "otlp", str(path), "--endpoint", phoenix.url,
                       "--project", project, "--follow"])  # fmt: skip
    try:
        first = follower.wait_line("", timeout=120)
        assert first.startswith("sent 3 spans of 1 runs"), first
        with Store.open(path) as store:  # another process writes while the export follows
            write_run(store, live, 2, "m-2")
            store.finish_run(live, "success")
            store.put_event(RunEvent(live, 2, "finished"))
            fresh = store.start_run("started after", "/repo")
            write_run(store, fresh, 1, "m-3")
            store.put_event(RunEvent(fresh, 1, "step_started"))
            store.finish_run(fresh, "stalled")
            store.put_event(RunEvent(fresh, 1, "finished"))
        lines = [follower.wait_line("", timeout=120), follower.wait_line("", timeout=120)]
        assert lines[-1].startswith("sent 8 spans of 2 runs"), lines  # since the follow began
        spans = phoenix.settled(project, 3 + 5 + 3)
        runs = sorted(
            s["attributes"]["harness.run.id"] for s in by_operation(spans, "invoke_agent")
        )
        assert runs == [done_before, live, fresh]
        finished = next(s for s in spans if s["attributes"].get("harness.run.id") == live)
        assert finished["attributes"]["harness.run.outcome"] == "success"
    finally:
        follower.proc.send_signal(signal.SIGINT)
        code = follower.finish(timeout=30)
    assert code == 0, follower.stderr


def test_central_postgresql_store_one_trace_per_origin_tree(
    tmp_path: Path, pg_url: str, phoenix: Phoenix, project: str
) -> None:
    sources = []
    for name in ("laptop", "ci"):
        path = tmp_path / f"{name}.sqlite3"
        with Store.open(path) as store:
            build_tree(store)
            store.checkpoint_step(store.start_run(f"{name} solo", "/repo"),
                                  StepRecord.new(1, "look", "ok"))  # fmt: skip
        sources.append(path)
    sync(sources, pg_url)
    with Store.open(pg_url, read_only=True) as central:
        report = export(central, endpoint=phoenix.url, project=project)
        spans = phoenix.settled(project, report.spans)
        assert report.runs == 10
        assert_matches_store(central, spans)
        roots = [r for r in central.runs() if central.parent(r) is None]
        assert len({s["context"]["trace_id"] for s in spans}) == len(roots) == 4
