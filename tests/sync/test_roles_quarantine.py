"""The quarantine under roles: a follower's sync quarantines its own run the centre cannot hold
(the table is guarded like every sync table), another follower cannot delete it, rewrite it
or plant an entry for an origin not its own, and the run is released to its follower once
repaired."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from support.pg_roles import DENIED, as_role, refused, run_sql
from support.synccheck import mirror_problems, write_source

from harness_store import Store
from harness_store.store.check_roles import unprotected_tables
from harness_store.sync import quarantined, sync
from harness_store.sync.roles import grant

from .test_quarantine import NUL, repair, spoil


def test_a_followers_quarantine_is_its_own(
    pg_url: str, tmp_path: Path, new_role: Callable[[], str]
) -> None:
    a, b = new_role(), new_role()
    grant(pg_url, a, "follower")
    grant(pg_url, b, "follower")
    url_a, url_b = as_role(pg_url, a), as_role(pg_url, b)
    host_a, host_b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    roots = write_source(host_a, runs=2, tag="a")
    write_source(host_b, runs=1, tag="b")
    row = spoil(host_a, "steps", "result", NUL, roots[0])

    report = sync([host_a], url_a)
    sync([host_b], url_b)
    assert [q.run for q in report.origins[0].quarantined] == [roots[0], roots[0] + 1]
    assert {q.run for q in quarantined(pg_url)} == {roots[0], roots[0] + 1}
    with Store.open(pg_url) as store:
        assert "hs_sync_quarantine" not in unprotected_tables(store)

    held = "SELECT count(*) FROM hs_sync_quarantine"
    before = run_sql(pg_url, held)[0][0]
    assert run_sql(url_b, "DELETE FROM hs_sync_quarantine") == 0
    assert run_sql(url_b, "UPDATE hs_sync_quarantine SET problem = 'x'") == 0
    (origin_a,) = run_sql(url_a, "SELECT origin_id FROM hs_sync_origin_roles "
                          "WHERE role = session_user")[0]  # fmt: skip
    planted = (
        "INSERT INTO hs_sync_quarantine (origin_id, run_id, tbl, row_key, col, problem, raw, "
        "first_seen, last_seen) SELECT :o, 999, 'runs', 'id=999', 'goal', 'x', raw, "
        "first_seen, last_seen FROM hs_sync_quarantine LIMIT 1"
    )
    assert refused(url_b, planted, {"o": origin_a}) == DENIED
    assert run_sql(pg_url, held)[0][0] == before
    assert run_sql(pg_url, "SELECT count(*) FROM hs_sync_quarantine WHERE problem = 'x'") == [(0,)]

    repair(host_a, "steps", "result", row)
    again = sync([host_a], url_a)
    assert again.origins[0].released == (roots[0], roots[0] + 1)
    assert quarantined(pg_url) == []
    assert mirror_problems(pg_url, host_a) == [] and mirror_problems(pg_url, host_b) == []
