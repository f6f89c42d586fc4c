"""`harness-store spend`, `events [--follow]` and `patch` on SQLite and PostgreSQL: what they
say (run in this process), and `--follow` as a live process beside a writer."""

from __future__ import annotations

import contextlib
import json
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from support.clirun import COMMAND, environ, run_in_process

from harness_store import Edit, PriceTable, ProviderCall, RunEvent, Store, Usage
from harness_store.cli.app import EXIT_NOT_FOUND, EXIT_USAGE

from .commandkit import ok


@pytest.fixture
def filled(store_target: str) -> dict[str, Any]:
    with Store.open(store_target) as store:
        a, b = store.start_run("a", "x"), store.start_run("b", "x")
        store.record_provider_call(
            a, ProviderCall(1, 1, "p", "m", Usage(1_000_000, 0, 1_000_000), 5)
        )
        store.record_provider_call(b, ProviderCall(1, 1, "p", None, Usage(5, 5, 10), 5))
        old = "one\ntwo\n"
        store.record_edit(
            a, Edit.measure(1, "w", "f.txt", old, "one\n2\n").with_hunk(old, "one\n2\n")
        )
        store.put_event(RunEvent.new(a, 1, "started", goal="a", provider="p"))
    return {"target": store_target, "a": a, "b": b}


@pytest.mark.slow_on("postgresql")
def test_spend_by_model_day_and_run(filled: dict[str, Any], tmp_path: Path) -> None:
    target = filled["target"]
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"as_of": "2026-11-30", "prices": {"m": {"input": 2_500_000}}}))
    by_model = json.loads(ok("spend", target, "--prices", prices, "--json"))
    assert [
        (g["key"], g["calls"], g["cost_micros"], g["unpriced_calls"]) for g in by_model["groups"]
    ] == [("(unknown model)", 1, 0, 1), ("m", 1, 2_500_000, 0)]
    text = ok("spend", target, "--prices", prices)
    assert "2.5" in text and "(unknown model)" in text
    by_run = json.loads(ok("spend", target, "--by", "run", "--json"))
    assert [g["key"] for g in by_run["groups"]] == sorted([str(filled["a"]), str(filled["b"])])
    by_day = json.loads(ok("spend", target, "--by", "day", "--json"))
    assert len(by_day["groups"]) == 1 and by_day["groups"][0]["calls"] == 2
    later = json.loads(ok("spend", target, "--since", "2999-01-01", "--json"))
    assert later["groups"] == []
    prices.write_text(json.dumps({"as_of": "x", "prices": {"m": {"inptu": 1}}}))
    done = run_in_process("spend", target, "--prices", prices)
    assert done.returncode == EXIT_USAGE and "inptu" in done.stderr


@pytest.mark.slow_on("postgresql")
def test_spend_answers_from_what_a_writable_store_kept(
    filled: dict[str, Any], tmp_path: Path
) -> None:
    """The command opens the store read-only, so it keeps nothing, but it answers from the
    answers a writable Store kept under the same price table: seen by marking the kept
    rows' cost, which pricing the calls again would not give."""
    target = filled["target"]
    document = {"as_of": "2026-11-30", "prices": {"m": {"input": 2_500_000}}}
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(document))
    with Store.open(target) as store:
        table = PriceTable.from_document(document)
        store.spend_by_run(table)
        store.spend_by_model(table)
        with store.engine.begin() as conn:
            conn.execute(text("UPDATE hs_spend_priced_runs SET cost_micros = 424242"))
            conn.execute(text("UPDATE hs_spend_priced_days SET cost_micros = 434343"))
    by_run = json.loads(ok("spend", target, "--by", "run", "--prices", prices, "--json"))
    assert [g["cost_micros"] for g in by_run["groups"]] == [424242, 424242]
    by_model = json.loads(ok("spend", target, "--prices", prices, "--json"))
    assert [g["cost_micros"] for g in by_model["groups"]] == [434343, 434343]
    other = json.loads(ok("spend", target, "--by", "run", "--json"))  # no kept answers: priced
    assert [g["cost_micros"] for g in other["groups"]] == [0, 0]


@pytest.mark.slow_on("postgresql")
def test_patch_prints_a_series_git_applies(filled: dict[str, Any], tmp_path: Path) -> None:
    patch = ok("patch", filled["target"], str(filled["a"]))
    assert patch.startswith("--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n")
    if shutil.which("git"):
        (tmp_path / "f.txt").write_text("one\ntwo\n")
        (tmp_path / "p.diff").write_text(patch)
        subprocess.run(["git", "apply", "p.diff"], cwd=tmp_path, check=True, timeout=60)
        assert (tmp_path / "f.txt").read_text() == "one\n2\n"
    assert run_in_process("patch", filled["target"], "999").returncode == EXIT_NOT_FOUND


@pytest.mark.slow_on("postgresql")
def test_events_lists_the_backlog(filled: dict[str, Any]) -> None:
    lines = ok("events", filled["target"], "--json").splitlines()
    assert [json.loads(x)["event"] for x in lines] == ["started"]
    assert ok("events", filled["target"], "--after", "1") == ""
    assert len(ok("events", filled["target"], "--after", "0").splitlines()) == 1


def test_events_takes_a_cursor_as_after_not_since(filled: dict[str, Any]) -> None:
    """`--since` is a time on every command; the event stream's cursor is `--after`, and
    `--since` here is a usage error that names it (and reads nothing)."""
    done = run_in_process("events", filled["target"], "--since", "1")
    assert done.returncode == EXIT_USAGE
    assert "--after" in done.stderr and done.stdout == ""


def test_spend_since_is_an_instant_whatever_the_calls_spelling(filled: dict[str, Any]) -> None:
    """A provider call stamped as `datetime('now')` writes it (`2026-12-07 06:51:00`) is
    counted from a `--since` on that day up to its second, in any form, and not after."""
    target = filled["target"]
    with Store.open(target) as store, store.engine.begin() as conn:
        conn.execute(text("UPDATE provider_calls SET at = '2026-12-07 06:51:00'"))

    def calls(since: str) -> int:
        document = json.loads(ok("spend", target, "--since", since, "--json"))
        return sum(g["calls"] for g in document["groups"])

    assert calls("2026-12-07") == 2
    assert calls("2026-12-07T00") == 2
    assert calls("2026-12-07T06:51:00Z") == 2
    assert calls("2026-12-07T08:51+02:00") == 2
    assert calls("2026-12-07 06:51:01") == 0
    assert calls("2026-12-08") == 0
    done = run_in_process("spend", target, "--since", "last week")
    assert done.returncode == EXIT_USAGE and "2026-01-31" in done.stderr


@pytest.mark.slow_on("postgresql")
def test_events_follow_is_a_live_tail(filled: dict[str, Any]) -> None:
    target, run = filled["target"], filled["a"]
    tail = subprocess.Popen(
        [*COMMAND, "events", target, "--follow", "--interval", "0.05", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ(),
        # Ctrl-C as at a terminal: a shell running the suite as a background job starts its
        # children with SIGINT ignored, which Python (rightly) keeps.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: queue.Queue[str] = queue.Queue()
    assert tail.stdout is not None
    threading.Thread(target=lambda: [lines.put(x) for x in tail.stdout], daemon=True).start()
    try:
        # The tail starts at the end, whenever its process is up (a loaded machine may take
        # seconds): write until it prints one, so its start cannot be raced.
        step, first = 1, None
        deadline = time.monotonic() + 60
        with Store.open(target) as store:
            while first is None and time.monotonic() < deadline:
                step += 1
                store.put_event(RunEvent.new(run, step, "stalled"))
                with contextlib.suppress(queue.Empty):
                    first = json.loads(lines.get(timeout=0.5))
            assert first is not None, "the tail printed nothing in 60 s"
            assert first["event"] == "stalled"  # the backlog ("started") is not printed
            for i in range(3):
                store.put_event(RunEvent.new(run, step + 1 + i, "stalled"))
        seen = [first["step"]]
        while seen[-1] < step + 3:
            seen.append(json.loads(lines.get(timeout=30))["step"])
        assert seen == list(range(first["step"], step + 4))  # each once, in order
    finally:
        tail.send_signal(signal.SIGINT)
        code = tail.wait(timeout=30)
    assert code == 0, tail.stderr.read() if tail.stderr else ""


if sys.platform == "win32":  # pragma: no cover
    pytestmark = pytest.mark.skip("SIGINT")
