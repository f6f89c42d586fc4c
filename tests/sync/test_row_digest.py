"""A state table's mark, hashed row by row as the rows come, is the mark earlier versions
wrote from the whole list: a centre synced before sees its origins' tables unchanged."""

from __future__ import annotations

from harness_store.sync.rows import digest, digest_rows


def test_rows_hashed_as_they_come_hash_as_the_whole_list() -> None:
    rows = [
        (1, "goal é", None, 2.5, b"\x00\xff"),
        (2, "\ud800 lone surrogate", "x", -1, b""),
        (3, "", "'quoted' \"both\"", 0, None),
    ]
    assert digest_rows(rows) == digest(rows)
    assert digest_rows(iter(rows)) == digest(rows)
    assert digest_rows([]) == digest([])
    assert digest_rows([rows[0]]) == digest([rows[0]])
