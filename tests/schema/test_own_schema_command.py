"""The command with a store in a PostgreSQL schema of its own, beside an application's tables:
`--schema` on every command with a store argument, `copy`'s `--source-schema`/`--dest-schema`
and sync's `--dest-schema`, and the URL's own spelling of it (`?options=-csearch_path%3DNAME`).
On SQLite `--schema` is a usage error, nothing created.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli.commandkit import EXIT_USAGE, fails, ok
from sqlalchemy import Engine
from support.app_database import tables_in

from harness_store import StepRecord, Store
from harness_store.releases import HEAD


def test_upgrade_runs_and_check_with_schema(tmp_path: Path, pg_url: str, admin: Engine) -> None:
    said = ok("upgrade", pg_url, "--schema", "harness")
    assert f"→ {HEAD}" in said
    assert "alembic_version" in tables_in(admin, "harness")
    assert tables_in(admin, "public") == {"app_users"}
    with Store.open(pg_url, schema="harness") as store:
        run = store.start_run("in its own schema", "out.txt")
        store.checkpoint_step(run, StepRecord.new(1, "d", "r"))
    runs = json.loads(ok("runs", pg_url, "--schema", "harness", "--json"))
    assert [r["run_id"] for r in runs] == [run]
    ok("check", pg_url, "--schema", "harness")
    # every command reads the schema from the URL as well
    spelled = f"{pg_url}?options=-csearch_path%3Dharness"
    assert json.loads(ok("runs", spelled, "--json"))[0]["run_id"] == run
    # without it the command looks at the application's schema, which is no store
    fails(3, "runs", pg_url)
    out = tmp_path / "dataset"
    ok("export", "parquet", spelled, out)
    assert any(out.rglob("*.parquet"))


def test_sync_into_a_destination_in_a_schema_of_its_own(
    tmp_path: Path, pg_url: str, admin: Engine
) -> None:
    source = tmp_path / "agent.sqlite3"
    with Store.open(source) as store:
        run = store.start_run("synced", "out.txt")
        store.checkpoint_step(run, StepRecord.new(1, "d", "r"))
    ok("sync", source, pg_url, "--dest-schema", "centre")
    assert {"runs", "alembic_version"} <= tables_in(admin, "centre")
    assert tables_in(admin, "public") == {"app_users"}
    runs = json.loads(ok("runs", pg_url, "--schema", "centre", "--json"))
    assert [r["goal"] for r in runs] == ["synced"]


def test_copy_into_a_schema_of_its_own_named_in_the_url(
    tmp_path: Path, pg_url: str, admin: Engine
) -> None:
    """The URL's own spelling reaches a copy target's every statement, as `--dest-schema` does."""
    source = tmp_path / "agent.sqlite3"
    with Store.open(source) as store:
        store.start_run("copied", "out.txt")
    ok("copy", source, f"{pg_url}?options=-csearch_path%3Dcopied")
    assert {"runs", "alembic_version"} <= tables_in(admin, "copied")
    assert tables_in(admin, "public") == {"app_users"}
    runs = json.loads(ok("runs", pg_url, "--schema", "copied", "--json"))
    assert [r["goal"] for r in runs] == ["copied"]


def test_schema_on_sqlite_is_a_usage_error_creating_nothing(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    line = fails(EXIT_USAGE, "upgrade", path, "--schema", "harness")
    assert "schema" in line
    source = tmp_path / "agent.sqlite3"
    Store.open(source).close()
    fails(EXIT_USAGE, "sync", source, path, "--dest-schema", "harness")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.sqlite3"]


READS = [
    ("runs",),
    ("trace", "{run}"),
    ("tree", "{run}"),
    ("events",),
    ("spend",),
    ("memory", "/ws"),
    ("inspect",),
    ("size",),
    ("check",),
    ("prune", "--before", "2000-01-01", "--dry-run"),
    ("prune", "--runs", "--before", "2000-01-01", "--dry-run"),
]
"""Every command that reads a store, as it is run on one in a schema of its own."""


def test_every_command_on_a_store_takes_schema(tmp_path: Path, pg_url: str, admin: Engine) -> None:
    """One word, one meaning: `--schema NAME` on every command with a store argument (and
    `--source-schema`/`--dest-schema` where there are two), the same as the URL's spelling;
    without it the command looks at the application's schema, which holds no store."""
    ok("upgrade", pg_url, "--schema", "harness")
    with Store.open(pg_url, schema="harness") as store:
        run = store.start_run("in its own schema", "out.txt")
        store.checkpoint_step(run, StepRecord.new(1, "d", "r"))
    for args in READS:
        filled = [a.format(run=run) for a in args]
        said = ok(filled[0], pg_url, *filled[1:], "--schema", "harness")
        assert said is not None, args
        fails(3, filled[0], pg_url, *filled[1:])
    ok("compact", pg_url, "--schema", "harness", "--yes")
    ok("export", "parquet", pg_url, tmp_path / "dataset", "--schema", "harness")
    assert any((tmp_path / "dataset").rglob("*.parquet"))
    copied = tmp_path / "copied.sqlite3"
    ok("copy", pg_url, copied, "--source-schema", "harness")
    with Store.open(copied) as store:
        assert len(store.runs()) == 1
    ok("copy", copied, pg_url, "--dest-schema", "second")
    assert "runs" in tables_in(admin, "second")
    assert tables_in(admin, "public") == {"app_users"}
