"""The roles' rules kept where the centre changes: an upgrade that adds a table a follower
writes, memory entries two followers share by (workspace, key), and the command that makes
and takes back the roles."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool
from support.clirun import run_in_process
from support.pg_roles import DENIED, as_role, refused, run_sql
from support.synccheck import mirror_problems, write_source

from harness_store import Store
from harness_store.dialects.postgresql_roles import grant_role
from harness_store.errors import PrivilegeError
from harness_store.models.sync import SYNC_METADATA
from harness_store.schema import upgrade
from harness_store.store.check_roles import unprotected_tables
from harness_store.sync import sync


def add_attempt(path: Path, run_id: int) -> None:
    """An open tool attempt of `run_id` (a table io-harness 0.65 added), as upstream writes it."""
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "INSERT INTO tool_attempts (run_id, step, tool) VALUES (?, 1, 'shell')", (run_id,)
        )


def test_an_upgrade_guards_the_tables_it_adds(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    """Roles made on a centre at 0.64, which has no `tool_attempts`; the upgrade to head adds
    it, and the followers' rules hold there as on every other table."""
    upgrade(pg_url, "0.64")
    a, b, reader = new_role(), new_role(), new_role()
    engine = create_engine(pg_url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            SYNC_METADATA.create_all(conn)
            grant_role(conn, a, "follower")
            grant_role(conn, b, "follower")
            grant_role(conn, reader, "reader")
    finally:
        engine.dispose()
    with pytest.raises(PrivilegeError):  # the owner alone migrates the centre
        upgrade(as_role(pg_url, a))
    assert run_sql(pg_url, "SELECT version_num FROM alembic_version") == [("0.64",)]
    upgrade(pg_url)
    with Store.open(pg_url) as store:
        assert unprotected_tables(store) == []
    host_a, host_b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    write_source(host_a, runs=1, steps=2, tag="a")
    write_source(host_b, runs=1, steps=2, tag="b")
    add_attempt(host_a, 1)
    add_attempt(host_b, 1)
    sync([host_a], as_role(pg_url, a))  # a follower writes the new table …
    sync([host_b], as_role(pg_url, b))
    assert mirror_problems(pg_url, host_a) == [] and mirror_problems(pg_url, host_b) == []
    (theirs,) = run_sql(
        pg_url,
        "SELECT t.id, t.run_id FROM tool_attempts t JOIN hs_sync_row_roles r "
        "ON r.tbl = 'runs' AND r.row_id = t.run_id WHERE r.role = :b",
        {"b": b},
    )
    url = as_role(pg_url, a)  # … but only its own rows of it
    assert run_sql(url, "DELETE FROM tool_attempts WHERE id = :i", {"i": theirs[0]}) == 0
    assert run_sql(url, "UPDATE tool_attempts SET tool = 'x' WHERE id = :i", {"i": theirs[0]}) == 0
    insert = "INSERT INTO tool_attempts (run_id, step, tool) VALUES (:r, 2, 'x')"
    assert refused(url, insert, {"r": theirs[1]}) == DENIED
    assert refused(url, "TRUNCATE tool_attempts") == DENIED
    assert mirror_problems(pg_url, host_b) == []
    reading = as_role(pg_url, reader)  # a reader reads the new table, and writes nothing there
    assert len(run_sql(reading, "SELECT id FROM tool_attempts")) == 2
    assert refused(reading, "DELETE FROM tool_attempts") == DENIED


def test_a_followers_newer_memory_entry_shadows_anothers_as_the_owners_sync_does(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    """One (workspace, key) is held centrally once: a follower's newer entry replaces another
    follower's (through the owner's trigger, as the owner's sync replaces it), and a plain
    DELETE of the other's entry still changes nothing."""
    a, b = new_role(), new_role()
    grant_role_now(pg_url, a, b)
    old, new = tmp_path / "old.sqlite3", tmp_path / "new.sqlite3"
    for path in (old, new):
        with Store.open(path) as store:
            run = store.start_run("g", "/src/g.rs")
    with Store.open(old) as store:
        store.memory_put("/ws", "shared", "old value", 1, 1)
    with Store.open(new) as store:
        store.memory_put("/ws", "shared", "new value", run, 1)
    sync([old], as_role(pg_url, a))
    assert refused_or_zero(as_role(pg_url, b), "DELETE FROM memory WHERE key = 'shared'")
    sync([new], as_role(pg_url, b))
    assert run_sql(pg_url, "SELECT value FROM memory WHERE key = 'shared'") == [("new value",)]
    shadowed = run_sql(
        pg_url,
        "SELECT i.dest_id FROM hs_sync_ids i JOIN hs_sync_origin_roles r USING (origin_id) "
        "WHERE i.tbl = 'memory' AND r.role = :a",
        {"a": a},
    )
    assert shadowed == [(None,)]  # the older entry's origin knows it is shadowed
    assert sync([old], as_role(pg_url, a)).rows == 0  # and sends nothing again


def grant_role_now(pg_url: str, *roles: str) -> None:
    from harness_store.sync.roles import grant

    for role in roles:
        grant(pg_url, role, "follower")


def refused_or_zero(url: str, sql: str) -> bool:
    """Whether `sql` changed nothing when the role of `url` ran it."""
    return bool(run_sql(url, sql) == 0)


def test_the_command_makes_brings_up_to_date_and_revokes_roles(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    follower, reader = new_role(), new_role()
    for flag, name, said in (("--follower", follower, "follower"), ("--reader", reader, "reader")):
        for _ in range(2):  # made, then brought up to date
            done = run_in_process("roles", pg_url, flag, name)
            assert done.returncode == 0, done.stderr
            assert done.stdout == f"{name}: {said}\n"
    host = tmp_path / "host.sqlite3"
    write_source(host, runs=1, steps=2)
    done = run_in_process("sync", host, as_role(pg_url, reader))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "refused" in done.stderr and "permission denied" in done.stderr
    done = run_in_process("roles", as_role(pg_url, follower), "--reader", new_role())
    assert done.returncode == 1 and "only the centre's owner" in done.stderr, done.stderr
    done = run_in_process("roles", pg_url, "--follower", follower, "--reader", reader)
    assert done.returncode == 2
    done = run_in_process("roles", tmp_path / "x.sqlite3", "--reader", reader)
    assert done.returncode == 1 and "PostgreSQL" in done.stderr
    done = run_in_process("roles", pg_url, "--revoke", reader)
    assert done.returncode == 0 and done.stdout == f"{reader}: revoked\n"
    assert refused(as_role(pg_url, reader), "SELECT 1 FROM runs") == DENIED


def test_a_sync_table_the_owners_sync_adds_gets_the_rules(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    """A table of sync's own that a later harness_store adds (here: one put back after it was
    dropped) is made by the owner's next sync, with the rules: a follower writes its own rows
    of it, and no other origin's."""
    a, b = new_role(), new_role()
    grant_role_now(pg_url, a, b)
    run_sql(pg_url, "DROP TABLE hs_sync_marks")
    sync([], pg_url)  # the owner's: sync's tables made again
    with Store.open(pg_url) as store:
        assert unprotected_tables(store) == []
    host_a, host_b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    write_source(host_a, runs=1, steps=2, tag="a")
    write_source(host_b, runs=1, steps=2, tag="b")
    sync([host_a], as_role(pg_url, a))
    sync([host_b], as_role(pg_url, b))
    (origin_b,) = run_sql(pg_url, "SELECT origin_id FROM hs_sync_origin_roles WHERE role = :b",
                          {"b": b})  # fmt: skip
    url = as_role(pg_url, a)
    assert run_sql(url, "DELETE FROM hs_sync_marks WHERE origin_id = :o", {"o": origin_b[0]}) == 0
    insert = "INSERT INTO hs_sync_marks VALUES (:o, 'steps', 1)"
    assert refused(url, insert, {"o": origin_b[0]}) == DENIED
