"""Roles on a centre that lives in a PostgreSQL schema of its own (an application's database):
the followers sync into that schema, their rules hold there, the reader reads it, and nothing
of the store is created in `public`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlalchemy.engine import make_url
from support.pg_roles import DENIED, as_role, refused, run_sql
from support.synccheck import mirror_problems, write_source

from harness_store.sync import sync
from harness_store.sync.roles import grant
from harness_store.targets import Target

SCHEMA = "harness"


def in_schema(url: str) -> str:
    return Target.parse(url, schema=SCHEMA).url.render_as_string(hide_password=False)


def test_roles_hold_in_a_schema_of_its_own(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    run_sql(pg_url, "CREATE TABLE public.app_orders (id integer PRIMARY KEY)")
    centre = in_schema(pg_url)
    a, b, reader = new_role(), new_role(), new_role()
    grant(centre, a, "follower")
    grant(centre, b, "follower")
    grant(centre, reader, "reader")
    host_a, host_b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    write_source(host_a, runs=2, steps=2, tag="a")
    write_source(host_b, runs=2, steps=2, tag="b")
    url_a, url_b = in_schema(as_role(pg_url, a)), in_schema(as_role(pg_url, b))
    sync([host_a], url_a)
    sync([host_b], url_b)
    assert mirror_problems(centre, host_a) == [] and mirror_problems(centre, host_b) == []

    public = run_sql(pg_url, "SELECT table_name FROM information_schema.tables "
                     "WHERE table_schema = 'public' ORDER BY 1")  # fmt: skip
    assert [r[0] for r in public] == ["app_orders"]
    (theirs,) = run_sql(centre, "SELECT min(i.dest_id) FROM hs_sync_ids i "
                        "JOIN hs_sync_origin_roles r USING (origin_id) "
                        "WHERE i.tbl = 'runs' AND r.role = :b", {"b": b})  # fmt: skip
    other = {"r": theirs[0]}
    assert run_sql(url_a, "DELETE FROM steps WHERE run_id = :r", other) == 0
    assert run_sql(url_a, "UPDATE runs SET goal = 'mine' WHERE id = :r", other) == 0
    assert refused(url_a, "INSERT INTO steps (run_id, step, decision, result) "
                   "VALUES (:r, 99, 'x', 'y')", other) == DENIED  # fmt: skip
    assert refused(url_a, f"DROP TABLE {SCHEMA}.runs") == DENIED  # not its owner
    reader_url = in_schema(as_role(pg_url, reader))
    assert run_sql(reader_url, "SELECT count(*) FROM runs")[0][0] >= 4
    assert refused(reader_url, "DELETE FROM runs") == DENIED
    assert mirror_problems(centre, host_b) == []
    assert make_url(centre).query  # the schema travels in the URL's options


def test_a_reader_reads_the_typed_times_and_a_follower_cannot_change_them(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    """The analysts' views (`<table>_times`) are readable by a reader role, in a schema of its
    own as in `public`; a follower cannot replace or drop them."""
    for centre in (pg_url, in_schema(pg_url)):
        reader, follower = new_role(), new_role()
        grant(centre, reader, "reader")
        grant(centre, follower, "follower")
        host = tmp_path / f"h{len(centre)}.sqlite3"
        write_source(host, runs=2, steps=2, tag="t")
        as_follower = as_role(pg_url, follower)
        as_reader = as_role(pg_url, reader)
        if centre != pg_url:
            as_follower, as_reader = in_schema(as_follower), in_schema(as_reader)
        sync([host], as_follower)
        started = run_sql(as_reader, "SELECT pg_typeof(started_at)::text, count(*) "
                          "FROM runs_times GROUP BY 1")  # fmt: skip
        assert [(t, n >= 2) for t, n in started] == [("timestamp with time zone", True)]
        assert refused(as_follower, "DROP VIEW runs_times") == DENIED
        replaced = "CREATE OR REPLACE VIEW runs_times AS SELECT 1 AS id"
        assert refused(as_follower, replaced) == DENIED
