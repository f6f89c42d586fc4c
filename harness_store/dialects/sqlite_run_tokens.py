"""SQLite's run token totals (revisions hs6 and hs7): triggers on `steps` (or
`provider_calls`) and `runs` keep each run's sum of `steps.tokens` in `hs_run_tokens` (of
`provider_calls.total_tokens` in `hs_run_call_tokens`), NULL once unknown, which the Store's
doors read."""

from __future__ import annotations

from ..formats import I64_MAX


def token_triggers_sql(table: str, source: str, column: str, *, run_insert: bool) -> list[str]:
    """The triggers keeping `table` (hs6's `hs_run_tokens`, hs7's `hs_run_call_tokens`): each
    run's sum of `source.column`, NULL once unknown, named after `table`; `run_insert`, a row
    of 0 for every run from its start (hs6's, which the door locks on PostgreSQL)."""

    def add(total: str, tokens: str) -> str:
        # NULL once unknown: a token that is no integer of at least 0, or a total that
        # would pass 2⁶³−1 (SQLite would make it REAL, and the door could not trust it)
        return (
            f"CASE WHEN {total} IS NULL THEN NULL WHEN {tokens} IS NULL THEN {total} "
            f"WHEN typeof({tokens}) <> 'integer' OR {tokens} < 0 "
            f"OR {total} > {I64_MAX} - {tokens} THEN NULL ELSE {total} + {tokens} END"
        )

    def take(row: str) -> str:
        tokens = f"{row}.{column}"
        return (
            f"UPDATE {table} SET total = CASE WHEN total IS NULL THEN NULL "
            f"WHEN {tokens} IS NULL THEN total WHEN typeof({tokens}) <> 'integer' "
            f"OR {tokens} < 0 THEN NULL ELSE total - {tokens} END "
            f"WHERE run_id = {row}.run_id;"
        )

    put = (
        f"INSERT INTO {table} (run_id, total) VALUES "
        f"(NEW.run_id, {add('0', f'NEW.{column}')}) "
        f"ON CONFLICT (run_id) DO UPDATE SET total = {add('total', f'NEW.{column}')};"
    )
    on = f"ON {source} FOR EACH ROW BEGIN"
    made = "CREATE TRIGGER IF NOT EXISTS"
    return [
        f"{made} {table}_insert AFTER INSERT {on} {put} END",
        f"{made} {table}_delete AFTER DELETE {on} {take('OLD')} END",
        f"{made} {table}_update AFTER UPDATE OF run_id, {column} {on} {take('OLD')} {put} END",
        # every run has its row from the start, as the door reads it
        *(
            [
                f"{made} {table}_run_insert AFTER INSERT ON runs "
                f"FOR EACH ROW BEGIN INSERT INTO {table} (run_id, total) VALUES (NEW.id, 0) "
                "ON CONFLICT (run_id) DO NOTHING; END"
            ]
            if run_insert
            else []
        ),
        f"{made} {table}_run_delete AFTER DELETE ON runs "
        f"FOR EACH ROW BEGIN DELETE FROM {table} WHERE run_id = OLD.id; END",
    ]


def token_backfill_sql(table: str, source: str, column: str, *, every_run: bool) -> str:
    """`table` filled from the rows of `source` already stored (`every_run`: a row of 0 for
    each run without any). Summed as two halves of 32 bits (SQLite's SUM fails past 2⁶³−1):
    the total fits when the high half, its carry in, stays below 2³¹."""
    high = "(hi + (lo >> 32))"
    rest = (
        "UNION ALL SELECT id, 0 FROM runs AS r "
        f"WHERE NOT EXISTS (SELECT 1 FROM {source} AS s WHERE s.run_id = r.id)"
        if every_run
        else ""
    )
    return (
        f"INSERT INTO {table} (run_id, total) SELECT run_id, "
        f"CASE WHEN bad > 0 OR {high} > 2147483647 THEN NULL "
        f"ELSE ({high} << 32) | (lo & 4294967295) END FROM ("
        f"SELECT run_id, sum(typeof({column}) NOT IN ('integer', 'null') OR {column} < 0) "
        f"AS bad, coalesce(sum({column} >> 32), 0) AS hi, "
        f"coalesce(sum({column} & 4294967295), 0) AS lo "
        f"FROM {source} GROUP BY run_id) {rest}"
    )
