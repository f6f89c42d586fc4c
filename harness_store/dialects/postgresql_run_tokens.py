"""PostgreSQL's run token totals (revision hs6): triggers on `steps` and `runs` keep each run's
total of `steps.tokens` in `hs_run_tokens`, NULL once unknown, which the Store's step door reads."""

from __future__ import annotations

import re
from collections.abc import Iterable

from sqlalchemy import Connection

from ..formats import I64_MAX


def run_tokens_triggers_sql() -> list[str]:
    big = I64_MAX

    def function(name: str, body: str) -> str:
        return (
            f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
            f"SET search_path FROM CURRENT AS $$ BEGIN {body} RETURN NULL; END $$"
        )

    def put(rows: str) -> str:
        # a run's new steps summed (NUMERIC: no overflow), NULL once unknown
        return (
            "INSERT INTO hs_run_tokens (run_id, total) SELECT run_id, "
            f"CASE WHEN bool_or(tokens < 0) OR coalesce(sum(tokens), 0) > {big} THEN NULL "
            f"ELSE coalesce(sum(tokens), 0)::BIGINT END FROM {rows} GROUP BY run_id "
            "ORDER BY run_id ON CONFLICT (run_id) DO UPDATE SET total = CASE "
            "WHEN hs_run_tokens.total IS NULL OR excluded.total IS NULL "
            f"OR hs_run_tokens.total > {big} - excluded.total THEN NULL "
            "ELSE hs_run_tokens.total + excluded.total END;"
        )

    def take(rows: str) -> str:
        return (
            "UPDATE hs_run_tokens AS t SET total = CASE WHEN t.total IS NULL "
            "OR d.negative IS TRUE THEN NULL ELSE t.total - d.tokens END "
            "FROM (SELECT run_id, coalesce(sum(tokens), 0) AS tokens, "
            f"bool_or(tokens < 0) AS negative FROM {rows} GROUP BY run_id) AS d "
            "WHERE t.run_id = d.run_id;"
        )

    one = "(SELECT OLD.run_id, OLD.tokens) AS o(run_id, tokens)"
    new = "(SELECT NEW.run_id, NEW.tokens) AS n(run_id, tokens)"
    # statement-level with transition tables for inserts and deletes (a COPY or a prune
    # touches each run once a statement), per row for updates (as hs3's spend triggers)
    return [
        function("hs_run_tokens_inserted", put("hs_new")),
        function("hs_run_tokens_deleted", take("hs_old")),
        function("hs_run_tokens_updated", f"{take(one)} {put(new)}"),
        # every run has its row from the start: the door locks it (`FOR UPDATE`), so two
        # writers of one run are checked one after the other
        function(
            "hs_run_tokens_run_inserted",
            "INSERT INTO hs_run_tokens (run_id, total) SELECT id, 0 FROM hs_new "
            "ORDER BY id ON CONFLICT (run_id) DO NOTHING;",
        ),
        function(
            "hs_run_tokens_run_deleted",
            "DELETE FROM hs_run_tokens WHERE run_id IN (SELECT id FROM hs_old);",
        ),
        "CREATE TRIGGER hs_run_tokens_run_insert AFTER INSERT ON runs "
        "REFERENCING NEW TABLE AS hs_new FOR EACH STATEMENT "
        "EXECUTE FUNCTION hs_run_tokens_run_inserted()",
        "CREATE TRIGGER hs_run_tokens_run_delete AFTER DELETE ON runs "
        "REFERENCING OLD TABLE AS hs_old FOR EACH STATEMENT "
        "EXECUTE FUNCTION hs_run_tokens_run_deleted()",
        "CREATE TRIGGER hs_run_tokens_insert AFTER INSERT ON steps "
        "REFERENCING NEW TABLE AS hs_new FOR EACH STATEMENT "
        "EXECUTE FUNCTION hs_run_tokens_inserted()",
        "CREATE TRIGGER hs_run_tokens_delete AFTER DELETE ON steps "
        "REFERENCING OLD TABLE AS hs_old FOR EACH STATEMENT "
        "EXECUTE FUNCTION hs_run_tokens_deleted()",
        "CREATE TRIGGER hs_run_tokens_update AFTER UPDATE OF run_id, tokens "
        "ON steps FOR EACH ROW EXECUTE FUNCTION hs_run_tokens_updated()",
    ]


def drop_run_tokens_triggers_sql() -> list[str]:
    return [
        *(f"DROP TRIGGER IF EXISTS hs_run_tokens_{op} ON steps"
          for op in ("insert", "delete", "update")),
        *(f"DROP TRIGGER IF EXISTS hs_run_tokens_{op} ON runs"
          for op in ("run_insert", "run_delete")),
        *(f"DROP FUNCTION IF EXISTS hs_run_tokens_{fn}()"
          for fn in ("inserted", "deleted", "updated", "run_inserted", "run_deleted")),
    ]  # fmt: skip


def run_tokens_backfill_sql() -> str:
    return (
        "INSERT INTO hs_run_tokens (run_id, total) SELECT run_id, "
        f"CASE WHEN bool_or(tokens < 0) OR coalesce(sum(tokens), 0) > {I64_MAX} THEN NULL "
        "ELSE coalesce(sum(tokens), 0)::BIGINT END FROM steps GROUP BY run_id "
        "UNION ALL SELECT id, 0 FROM runs AS r "
        "WHERE NOT EXISTS (SELECT 1 FROM steps AS s WHERE s.run_id = r.id)"
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
