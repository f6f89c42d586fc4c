"""`harness-store roles`: a PostgreSQL centre's follower and reader roles, held by PostgreSQL.

Each test logs in as the roles it makes (trust authentication on 127.0.0.1) and tries what the
role must not be able to do — plain SQL against another origin's rows, another origin's store,
DDL, making roles — and what it must (sync, follow, read). Roles are the cluster's: each test
makes its own, uniquely named, and drops them whatever happens.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool
from support.pg_roles import DENIED, as_role, refused, run_sql
from support.synccheck import mirror_problems, write_source

from harness_store import Store
from harness_store.errors import InvalidValueError, OriginOfAnotherRoleError, PrivilegeError
from harness_store.store.check_roles import unprotected_tables
from harness_store.sync import FollowPass, SyncRefusedError, follow, list_origins, sync
from harness_store.sync.roles import grant, revoke


def fleet(pg_url: str, tmp_path: Path, new_role: Callable[[], str]) -> tuple[str, str, Path, Path]:
    """A centre with two followers, each having synced its own host's store: the followers'
    URLs and the stores."""
    a, b = new_role(), new_role()
    grant(pg_url, a, "follower")
    grant(pg_url, b, "follower")
    host_a, host_b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    write_source(host_a, runs=2, steps=3, tag="a")
    write_source(host_b, runs=2, steps=3, tag="b")
    sync([host_a], as_role(pg_url, a))
    sync([host_b], as_role(pg_url, b))
    return as_role(pg_url, a), as_role(pg_url, b), host_a, host_b


def runs_of(url: str, origin_path: Path) -> list[int]:
    rows = run_sql(
        url,
        "SELECT i.dest_id FROM hs_sync_ids i JOIN hs_sync_origins o ON o.id = i.origin_id "
        "WHERE i.tbl = 'runs' AND o.path = :p ORDER BY i.dest_id",
        {"p": str(origin_path.resolve())},
    )
    return [int(r[0]) for r in rows]


def test_followers_sync_their_own_stores_and_plain_sql_cannot_touch_the_others(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    a, b, host_a, host_b = fleet(pg_url, tmp_path, new_role)
    assert mirror_problems(pg_url, host_a) == [] and mirror_problems(pg_url, host_b) == []
    theirs = runs_of(pg_url, host_b)
    ours = runs_of(pg_url, host_a)
    other = {"r": theirs[0]}
    # reads see everything
    assert run_sql(a, "SELECT count(*) FROM runs")[0][0] == len(theirs) + len(ours)
    # another origin's rows: DELETE and UPDATE find nothing to change, silently
    assert run_sql(a, "DELETE FROM steps WHERE run_id = :r", other) == 0
    assert run_sql(a, "UPDATE runs SET goal = 'mine' WHERE id = :r", other) == 0
    assert run_sql(a, "DELETE FROM runs WHERE id = :r", other) == 0
    assert run_sql(a, "DELETE FROM hs_sync_ids WHERE origin_id <> 0 AND tbl = 'runs' "
                   "AND dest_id = :r", other) == 0  # fmt: skip
    marks = "SELECT count(*) FROM hs_sync_marks m JOIN hs_sync_origin_roles r USING (origin_id) "
    mine, others = (run_sql(pg_url, f"{marks} WHERE r.role {op} :r", {"r": make_url(a).username})
                    for op in ("=", "<>"))  # fmt: skip
    assert run_sql(a, "DELETE FROM hs_sync_marks") == mine[0][0]  # its own marks only
    assert run_sql(pg_url, f"{marks} WHERE r.role <> :r", {"r": make_url(a).username}) == others
    # a crafted INSERT with another origin's ids: refused by the policies
    assert refused(a, "INSERT INTO steps (run_id, step, decision, result) "
                   "VALUES (:r, 99, 'x', 'y')", other) == DENIED  # fmt: skip
    origin_b = run_sql(b, "SELECT origin_id FROM hs_sync_origin_roles WHERE role = session_user")
    assert refused(a, "INSERT INTO hs_sync_ids (origin_id, tbl, src_id, dest_id) "
                   "VALUES (:o, 'runs', 999, 1)", {"o": origin_b[0][0]}) == DENIED  # fmt: skip
    mine = run_sql(a, "SELECT origin_id FROM hs_sync_origin_roles WHERE role = session_user")
    planted = "INSERT INTO hs_sync_ids (origin_id, tbl, src_id, dest_id) VALUES (:o, 'runs', 9, :r)"
    assert refused(a, planted, {"o": mine[0][0], **other}) == DENIED  # its own map, their run
    # moving its own row into another's run: refused
    assert refused(a, "UPDATE steps SET run_id = :r WHERE run_id = :mine",
                   {**other, "mine": ours[0]}) == DENIED  # fmt: skip
    # another origin's registration cannot be changed
    assert refused(a, "UPDATE hs_sync_origins SET path = '/x' WHERE id = :o",
                   {"o": origin_b[0][0]}) == "HS001"  # fmt: skip
    # TRUNCATE, DROP, ALTER, CREATE, the rules' tables, making roles: refused
    for sql in (
        "TRUNCATE steps",
        "DROP TABLE steps",
        "ALTER TABLE runs DISABLE ROW LEVEL SECURITY",
        "ALTER TABLE steps ADD COLUMN x int",
        "CREATE TABLE mine (x int)",
        "DROP POLICY hs_delete ON steps",
        "INSERT INTO hs_sync_origin_roles VALUES (:o, session_user)",
        "DELETE FROM hs_sync_row_roles",
        f"CREATE ROLE hs_test_{uuid.uuid4().hex[:12]}",
    ):
        assert refused(a, sql, {"o": origin_b[0][0]}) == DENIED, sql
    assert mirror_problems(pg_url, host_b) == []  # nothing of B's changed
    # and the follower's own rows are its to change
    assert run_sql(a, "UPDATE runs SET goal = goal WHERE id = :r", {"r": ours[0]}) == 1


def test_a_follower_cannot_sync_a_store_another_followers_origin_owns(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    a, _, _, host_b = fleet(pg_url, tmp_path, new_role)
    before = runs_of(pg_url, host_b)
    with pytest.raises(SyncRefusedError) as caught:
        sync([host_b], a)
    (refusal,) = caught.value.report.refused
    assert isinstance(refusal.error, OriginOfAnotherRoleError)
    assert "belongs to role" in str(refusal.error) and str(host_b) in refusal.source
    assert runs_of(pg_url, host_b) == before and mirror_problems(pg_url, host_b) == []


def test_a_follower_cannot_upgrade_the_centre_nor_make_roles(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    follower = new_role()
    grant(pg_url, follower, "follower")
    url = as_role(pg_url, follower)
    with pytest.raises(InvalidValueError, match="owner"):
        grant(url, new_role(), "reader")
    with engine_as(url) as conn, pytest.raises(DBAPIError) as caught:
        conn.execute(text("DROP TABLE hs_sync_roles"))
    assert caught.value.orig.sqlstate == DENIED  # type: ignore[union-attr]


class engine_as:
    """One transaction as the role of `url`, rolled back."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url, poolclass=NullPool)

    def __enter__(self) -> Any:
        self.conn = self.engine.connect()
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()
        self.engine.dispose()


def test_a_reader_reads_everything_and_writes_nothing(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    _, _, host_a, _ = fleet(pg_url, tmp_path, new_role)
    reader = new_role()
    grant(pg_url, reader, "reader")
    url = as_role(pg_url, reader)
    assert [o.path for o in list_origins(url)] == [
        str(host_a.resolve()),
        str(tmp_path.resolve() / "b.sqlite3"),
    ]
    with Store.open(url, read_only=True) as store:
        assert len(store.runs()) == 8
    for sql in (
        "DELETE FROM steps",
        "UPDATE runs SET goal = 'x'",
        "TRUNCATE runs",
        "INSERT INTO hs_sync_roles VALUES ('x', 'follower')",
        "CREATE TABLE t (x int)",
    ):
        assert refused(url, sql) == DENIED, sql
    with pytest.raises(PrivilegeError):
        sync([host_a], url)


def test_the_owner_binds_an_origin_it_synced_to_a_follower(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    """An origin the owner synced is the owner's until it names a follower for it; a
    follower meanwhile is refused it."""
    host = tmp_path / "host.sqlite3"
    write_source(host, runs=1, steps=2, tag="h")
    (origin,) = sync([host], pg_url).origins
    follower = new_role()
    grant(pg_url, follower, "follower")
    url = as_role(pg_url, follower)
    with pytest.raises(SyncRefusedError, match="the owner"):
        sync([host], url)
    grant(pg_url, follower, "follower", origin=origin.origin)
    with Store.open(host) as store:
        store.start_run("later", "/src/later.rs")
    assert sync([host], url).origins[0].counts.inserted["runs"] == 1
    assert mirror_problems(pg_url, host) == []


def test_revoke_takes_every_right_back(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    a, _, host_a, _ = fleet(pg_url, tmp_path, new_role)
    role = make_url(a).username
    assert role is not None
    assert revoke(pg_url, role).known
    assert refused(a, "SELECT count(*) FROM runs") == DENIED
    with pytest.raises(PrivilegeError):
        sync([host_a], a)
    assert not revoke(pg_url, role).known


def test_both_followers_of_a_two_host_fleet_follow_with_their_own_roles(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    a, b = new_role(), new_role()
    grant(pg_url, a, "follower")
    grant(pg_url, b, "follower")
    hosts = {a: tmp_path / "a.sqlite3", b: tmp_path / "b.sqlite3"}
    for role, path in hosts.items():
        write_source(path, runs=2, steps=3, tag=role[-4:])

    def follow_once(role: str) -> None:
        stop = threading.Event()

        def on_event(event: object) -> None:
            if isinstance(event, FollowPass):
                stop.set()

        report = follow([hosts[role]], as_role(pg_url, role), stop=stop, on_event=on_event)
        assert report.retries == 0

    threads = [threading.Thread(target=follow_once, args=(r,)) for r in hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for role, path in hosts.items():
        assert mirror_problems(pg_url, path) == []
        (bound,) = run_sql(pg_url, "SELECT count(*) FROM hs_sync_origin_roles WHERE role = :r",
                           {"r": role})  # fmt: skip
        assert bound[0] == 1


def test_check_names_a_table_a_follower_may_write_without_a_policy(
    pg_url: str, new_role: Callable[[], str]
) -> None:
    grant(pg_url, new_role(), "follower")
    with Store.open(pg_url) as store:
        assert unprotected_tables(store) == []
        assert [f.table for f in store.check().findings if f.table == "todos"] == []
    run_sql(pg_url, "DROP POLICY hs_insert ON todos")
    with Store.open(pg_url) as store:
        assert unprotected_tables(store) == ["todos"]
        assert any(
            f.table == "todos" and f.kind.value == "unguarded_table" for f in store.check().findings
        )


def test_a_role_made_twice_is_a_typed_error(pg_url: str, new_role: Callable[[], str]) -> None:
    """What `roles` reads of a refusal is a typed error, from SQLSTATE 42710 too (an object
    that exists already: a role made twice, a rule another made), never the driver's."""
    from harness_store.connector import connector_at
    from harness_store.connector.translation import typed_or_same
    from harness_store.errors import DuplicateObjectError

    name = new_role()
    with connector_at(make_url(pg_url)) as central:
        with central.load() as conn:
            conn.execute(text(f'CREATE ROLE "{name}"'))
        with pytest.raises(Exception) as raised, central.load() as conn:
            conn.execute(text(f'CREATE ROLE "{name}"'))
    assert isinstance(typed_or_same(raised.value), DuplicateObjectError)
