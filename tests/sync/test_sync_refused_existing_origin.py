"""A source already synced (an existing origin; into a SQLite centre, written in slices) whose
new rows include one the centre cannot take and no run owns — a text whose bytes are not
UTF-8, in an append table's row whose run id is no integer or in a session's row — is refused
by name, and, as the refusal says, "nothing of it was synced": the centre holds exactly what
it held before the pass, row for row, its sync bookkeeping (the origin's row) included, on
either centre.

On a SQLite centre the pass registers the origin (`synced_at`, `syncs + 1`) in a first slice
it commits before it finds the row; the refusal puts the origin's row back as it was. Every
io-harness table is left as it was: the row is found before any is written (the run id by
the link check, the session's text by the read of the state tables)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select
from support.synccheck import write_source

from harness_store.models import Base
from harness_store.models.sync import SYNC_METADATA
from harness_store.sync import SyncRefusedError, sync

NOT_UTF8 = "CAST(X'70FF71' AS TEXT)"
"""`p`, a byte no UTF-8 text holds, `q`: kept by SQLite as text, which no reader takes."""

SPOIL = {
    "an append row whose run id is no integer": (
        "INSERT INTO summaries (run_id, through_step, folded, text) "
        f"VALUES (1.5, 1, 1, {NOT_UTF8})",
        "summaries.run_id",
    ),
    "a session's text": (f"INSERT INTO sessions (root) VALUES ({NOT_UTF8})", "sessions.root"),
}


def contents(target: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the centre, its sync bookkeeping included (on SQLite, each
    text as its bytes, whether UTF-8 or not)."""
    engine = create_engine(target if "://" in target else f"sqlite:///{target}")
    try:
        with engine.connect() as conn:
            if "://" not in target:
                driver = conn.connection.driver_connection
                driver.text_factory = bytes  # type: ignore[union-attr]
            tables = [*Base.metadata.sorted_tables, *SYNC_METADATA.sorted_tables]
            return {t.name: sorted(map(tuple, conn.execute(select(t))), key=repr) for t in tables}
    finally:
        engine.dispose()


@pytest.mark.parametrize("spoil", sorted(SPOIL))
def test_a_refused_existing_origin_leaves_the_centre_as_it_was(
    tmp_path: Path, store_target: str, spoil: str
) -> None:
    host, centre = tmp_path / "host.sqlite3", store_target
    write_source(host, runs=1)
    sync([host], centre)
    before = contents(centre)
    # New rows enough for many slices (runs first), and one row the centre cannot take.
    write_source(host, runs=40, tag="more")
    statement, named = SPOIL[spoil]
    with closing(sqlite3.connect(host)) as conn, conn:
        conn.execute(statement)
    with pytest.raises(SyncRefusedError) as refused:
        sync([host], centre, batch_size=10)
    said = str(refused.value.refused[0].error)
    assert named in said and "nothing of it was synced" in said
    after = contents(centre)
    changed = {name for name in before if after[name] != before[name]}
    assert changed == set(), {name: (before[name], after[name]) for name in changed}
