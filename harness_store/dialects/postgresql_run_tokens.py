"""PostgreSQL's run token totals (revision hs6): triggers on `steps` and `runs` keep each run's
total of `steps.tokens` in `hs_run_tokens`, NULL once unknown, which the Store's step door reads."""

from __future__ import annotations

import re
from collections.abc import Iterable

from sqlalchemy import Connection

from ..formats import I64_MAX


def run_tokens_triggers_sql() -> list[str]:
    return token_triggers_sql("hs_run_tokens", "steps", "tokens", run_insert=True)


def drop_run_tokens_triggers_sql() -> list[str]:
    return drop_token_triggers_sql("hs_run_tokens", "steps", run_insert=True)


def run_tokens_backfill_sql() -> str:
    return token_backfill_sql("hs_run_tokens", "steps", "tokens", every_run=True)


def call_tokens_triggers_sql() -> list[str]:
    return token_triggers_sql("hs_run_call_tokens", "provider_calls", "total_tokens",
                              run_insert=False)  # fmt: skip


def drop_call_tokens_triggers_sql() -> list[str]:
    return drop_token_triggers_sql("hs_run_call_tokens", "provider_calls", run_insert=False)


def call_tokens_backfill_sql() -> str:
    return token_backfill_sql("hs_run_call_tokens", "provider_calls", "total_tokens",
                              every_run=False)  # fmt: skip


def token_triggers_sql(table: str, source: str, column: str, *, run_insert: bool) -> list[str]:
    """The triggers and their functions keeping `table` (hs6's `hs_run_tokens`, hs7's
    `hs_run_call_tokens`): each run's sum of `source.column`, NULL once unknown, named after
    `table`; `run_insert`, a row of 0 for every run from its start (hs6's, which the doors
    lock)."""
    big = I64_MAX

    def function(name: str, body: str) -> str:
        return (
            f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
            f"SET search_path FROM CURRENT AS $$ BEGIN {body} RETURN NULL; END $$"
        )

    def put(rows: str) -> str:
        # a run's new rows summed (NUMERIC: no overflow), NULL once unknown
        return (
            f"INSERT INTO {table} (run_id, total) SELECT run_id, "
            f"CASE WHEN bool_or(tokens < 0) OR coalesce(sum(tokens), 0) > {big} THEN NULL "
            f"ELSE coalesce(sum(tokens), 0)::BIGINT END FROM {rows} GROUP BY run_id "
            "ORDER BY run_id ON CONFLICT (run_id) DO UPDATE SET total = CASE "
            f"WHEN {table}.total IS NULL OR excluded.total IS NULL "
            f"OR {table}.total > {big} - excluded.total THEN NULL "
            f"ELSE {table}.total + excluded.total END;"
        )

    def take(rows: str) -> str:
        return (
            f"UPDATE {table} AS t SET total = CASE WHEN t.total IS NULL "
            "OR d.negative IS TRUE THEN NULL ELSE t.total - d.tokens END "
            "FROM (SELECT run_id, coalesce(sum(tokens), 0) AS tokens, "
            f"bool_or(tokens < 0) AS negative FROM {rows} GROUP BY run_id) AS d "
            "WHERE t.run_id = d.run_id;"
        )

    # the transition tables' column named `tokens` whatever the source's is
    new_rows = (
        "hs_new" if column == "tokens" else f"(SELECT run_id, {column} AS tokens FROM hs_new) AS n"
    )
    old_rows = (
        "hs_old" if column == "tokens" else f"(SELECT run_id, {column} AS tokens FROM hs_old) AS o"
    )
    one = f"(SELECT OLD.run_id, OLD.{column}) AS o(run_id, tokens)"
    new = f"(SELECT NEW.run_id, NEW.{column}) AS n(run_id, tokens)"
    runs = (
        [
            # every run has its row from the start: the doors lock it (`FOR UPDATE`), so two
            # writers of one run are checked one after the other
            function(
                f"{table}_run_inserted",
                f"INSERT INTO {table} (run_id, total) SELECT id, 0 FROM hs_new "
                "ORDER BY id ON CONFLICT (run_id) DO NOTHING;",
            ),
        ]
        if run_insert
        else []
    )
    # statement-level with transition tables for inserts and deletes (a COPY or a prune
    # touches each run once a statement), per row for updates (as hs3's spend triggers)
    return [
        function(f"{table}_inserted", put(new_rows)),
        function(f"{table}_deleted", take(old_rows)),
        function(f"{table}_updated", f"{take(one)} {put(new)}"),
        *runs,
        function(
            f"{table}_run_deleted",
            f"DELETE FROM {table} WHERE run_id IN (SELECT id FROM hs_old);",
        ),
        *(
            [
                f"CREATE TRIGGER {table}_run_insert AFTER INSERT ON runs "
                "REFERENCING NEW TABLE AS hs_new FOR EACH STATEMENT "
                f"EXECUTE FUNCTION {table}_run_inserted()"
            ]
            if run_insert
            else []
        ),
        f"CREATE TRIGGER {table}_run_delete AFTER DELETE ON runs "
        "REFERENCING OLD TABLE AS hs_old FOR EACH STATEMENT "
        f"EXECUTE FUNCTION {table}_run_deleted()",
        f"CREATE TRIGGER {table}_insert AFTER INSERT ON {source} "
        "REFERENCING NEW TABLE AS hs_new FOR EACH STATEMENT "
        f"EXECUTE FUNCTION {table}_inserted()",
        f"CREATE TRIGGER {table}_delete AFTER DELETE ON {source} "
        "REFERENCING OLD TABLE AS hs_old FOR EACH STATEMENT "
        f"EXECUTE FUNCTION {table}_deleted()",
        f"CREATE TRIGGER {table}_update AFTER UPDATE OF run_id, {column} "
        f"ON {source} FOR EACH ROW EXECUTE FUNCTION {table}_updated()",
    ]


def drop_token_triggers_sql(table: str, source: str, *, run_insert: bool) -> list[str]:
    run_ops = ("run_insert", "run_delete") if run_insert else ("run_delete",)
    functions = ("inserted", "deleted", "updated", *(("run_inserted",) if run_insert else ()),
                 "run_deleted")  # fmt: skip
    return [
        *(f"DROP TRIGGER IF EXISTS {table}_{op} ON {source}"
          for op in ("insert", "delete", "update")),
        *(f"DROP TRIGGER IF EXISTS {table}_{op} ON runs" for op in run_ops),
        *(f"DROP FUNCTION IF EXISTS {table}_{fn}()" for fn in functions),
    ]  # fmt: skip


def token_backfill_sql(table: str, source: str, column: str, *, every_run: bool) -> str:
    rest = (
        " UNION ALL SELECT id, 0 FROM runs AS r "
        f"WHERE NOT EXISTS (SELECT 1 FROM {source} AS s WHERE s.run_id = r.id)"
        if every_run
        else ""
    )
    return (
        f"INSERT INTO {table} (run_id, total) SELECT run_id, "
        f"CASE WHEN bool_or({column} < 0) OR coalesce(sum({column}), 0) > {I64_MAX} THEN NULL "
        f"ELSE coalesce(sum({column}), 0)::BIGINT END FROM {source} GROUP BY run_id{rest}"
    )


_FUNCTION = re.compile(r"CREATE OR REPLACE FUNCTION (\w+)\(\).*? AS \$\$(.*)\$\$\Z", re.S)
_TRIGGER = re.compile(r"CREATE TRIGGER (\w+) .* EXECUTE FUNCTION (\w+)\(\)\Z", re.S)


def altered_triggers(conn: Connection, statements: Iterable[str]) -> frozenset[str]:
    """Of the triggers `statements` create, those present (in the current schema) that run
    another function than theirs, or theirs with another body than the statements give it."""
    bodies: dict[str, str] = {}
    functions: dict[str, str] = {}
    for statement in statements:
        if found := _FUNCTION.match(statement):
            bodies[found[1]] = found[2]
        elif found := _TRIGGER.match(statement):
            functions[found[1]] = found[2]
    rows = conn.exec_driver_sql(
        "SELECT t.tgname, p.proname, p.prosrc FROM pg_trigger t "
        "JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_proc p ON p.oid = t.tgfoid "
        "WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal "
        "AND t.tgname = ANY(%(names)s)",
        {"names": list(functions)},
    ).all()
    return frozenset(
        str(name)
        for name, function, body in rows
        if function != functions[name] or body != bodies.get(function)
    )
