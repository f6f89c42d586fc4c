"""Every read command and every Store read on a store of an older release: it reads what
that release has (an empty answer where the table or column did not exist yet) or refuses,
naming `harness-store upgrade`; never a driver error. The same on both backends."""

from __future__ import annotations

import inspect
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest
from support.clirun import run_in_process
from support.shared import FIXTURE_STORES, copy_fixture
from support.tiers import sampled

from harness_store import Store
from harness_store.aio.methods import NOT_MIRRORED, access, public_methods
from harness_store.errors import StoreError, UpgradeRequiredError
from harness_store.records import PriceTable
from harness_store.releases import REVISIONS

from .conftest import CHAIN, DRIVER_WORDS, FIRST_READABLE, sampled_revisions

READS = frozenset(
    name
    for name in public_methods(Store) - NOT_MIRRORED
    if access(Store, name).kind == "read"
    and not (access(Store, name).iterates and access(Store, name).page is None)
)
"""The Store methods that only read (generators included, but `follow`, which never ends)."""

READ_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("inspect", "{db}"),
    ("runs", "{db}"),
    ("runs", "{db}", "--all", "--json"),
    ("trace", "{db}", "1"),
    ("trace", "{db}", "1", "--json"),
    ("tree", "{db}", "1"),
    ("memory", "{db}", "/repo"),
    ("spend", "{db}"),
    ("spend", "{db}", "--by", "day"),
    ("spend", "{db}", "--by", "run"),
    ("events", "{db}"),
    ("events", "{db}", "--run", "1", "--json"),
    ("patch", "{db}", "1"),
    ("size", "{db}"),
    ("origins", "{db}"),
)
"""Every read command, with the arguments a newcomer would give it (run 1 exists)."""


def readable(revision: str) -> bool:
    return revision in REVISIONS[FIRST_READABLE:]


def outcome_of(ran: CompletedProcess[str]) -> int:
    """A command's exit code, after checking that what it said is no driver error and that a
    refusal names the upgrade."""
    assert not DRIVER_WORDS.search(ran.stderr), ran.stderr
    assert ran.returncode in (0, 3), ran
    if ran.returncode == 3:
        assert "harness-store upgrade" in ran.stderr, ran.stderr
    return ran.returncode


def command_outcomes(db: str) -> dict[str, int]:
    return {
        " ".join(args): outcome_of(run_in_process(*(a.format(db=db) for a in args)))
        for args in READ_COMMANDS
    }


def arguments(name: str) -> list[Any]:
    """Arguments for a read method: run 1, workspace `/repo`, an empty price table."""
    out: list[Any] = []
    for p in list(inspect.signature(getattr(Store, name)).parameters.values())[1:]:
        if p.default is not inspect.Parameter.empty or p.kind is p.KEYWORD_ONLY:
            continue
        annotation = str(p.annotation)
        if p.name == "prices":
            out.append(PriceTable.new("now"))
        elif p.name == "table":
            out.append("runs")
        elif annotation.startswith("str"):
            out.append("/repo")
        else:
            out.append(1)
    return out


def method_outcomes(target: str) -> dict[str, str]:
    """Each public read method's outcome on a read-only open: `ok`, or the typed error's
    class; a generic `StoreError` (a driver error wrapped) fails the test."""
    outcomes: dict[str, str] = {}
    with Store.open(target, read_only=True) as store:
        for name in sorted(READS | {"iter_steps"}):
            try:
                answer = getattr(store, name)(*arguments(name))
                if inspect.isgenerator(answer):
                    list(answer)
                outcomes[name] = "ok"
            except UpgradeRequiredError as exc:
                assert "harness-store upgrade" in str(exc), (name, exc)
                outcomes[name] = type(exc).__name__
            except StoreError as exc:
                assert type(exc) is not StoreError, (name, exc)
                assert not DRIVER_WORDS.search(str(exc)), (name, exc)
                outcomes[name] = type(exc).__name__
    return outcomes


@pytest.mark.parametrize("revision", sampled_revisions(CHAIN))
def test_read_commands_at_every_revision(
    revision: str, sqlite_chain: dict[str, str], request: pytest.FixtureRequest
) -> None:
    """Every read command reads or refuses with exit 3; a store below 0.13 is refused by all
    but `inspect` (what it is) and `origins` (nothing was synced into it); PostgreSQL answers
    as SQLite does."""
    on_sqlite = command_outcomes(sqlite_chain[revision])
    if not readable(revision):
        answered = {c for c, code in on_sqlite.items() if code == 0}
        assert answered == {"inspect {db}", "origins {db}"}
    pg_chain = request.getfixturevalue("pg_chain")  # without a server: skipped, not passed
    assert command_outcomes(pg_chain[revision]) == on_sqlite


@pytest.mark.parametrize("revision", sampled_revisions(r for r in CHAIN if readable(r)))
def test_store_reads_at_every_revision(
    revision: str, sqlite_chain: dict[str, str], request: pytest.FixtureRequest
) -> None:
    """Every public read of a read-only Store answers or raises a typed error; the same on
    PostgreSQL."""
    on_sqlite = method_outcomes(sqlite_chain[revision])
    pg_chain = request.getfixturevalue("pg_chain")  # without a server: skipped, not passed
    assert method_outcomes(pg_chain[revision]) == on_sqlite


@pytest.mark.parametrize("fixture", sampled(FIXTURE_STORES, keep=2))
def test_real_release_stores(fixture: str, tmp_path: Path) -> None:
    """The real io-harness 0.22 and 0.29 stores: every read command exits 0 (each of them
    holds the 0.13 schema), every Store read answers — but the exporters' reads (the trace
    exporter's spans, the Arrow tables), which need the newest shape and say to upgrade."""
    db = str(copy_fixture(fixture, tmp_path))
    assert set(command_outcomes(db).values()) == {0}
    outcomes = method_outcomes(db)
    refused = {name for name, outcome in outcomes.items() if outcome != "ok"}
    exporters = {"arrow", "iter_arrow", "frame"} | {n for n in outcomes if n.startswith("span_")}
    assert refused <= exporters, outcomes
    assert {outcomes[name] for name in refused} <= {"UpgradeRequiredError"}


def test_events_and_patch_on_a_022_store_say_what_it_has(tmp_path: Path) -> None:
    """0.22 had no event stream and kept no hunks: `events` prints none, `patch` lists the
    run's edits as comment lines, as for any edit without a hunk."""
    db = copy_fixture("io-harness-0.22.0/populated", tmp_path)
    events = run_in_process("events", db, "--json")
    assert events.returncode == 0, events
    with Store.open(db, read_only=True) as store:
        edits = store.edits(1)
        assert store.events_after(0, 10) == []
        assert store.event_cursor() == 0
        expected_patch = store.patch(1)
    assert all(e.hunk is None for e in edits)
    patch = run_in_process("patch", db, "1")
    assert patch.returncode == 0, patch
    assert patch.stdout.strip() == expected_patch.strip()
    assert patch.stdout.count("no hunk stored") == len(edits)
