"""PostgreSQL's spend triggers (revision hs3): every insert, delete and usage update of
`provider_calls` bumps its group's counters in `hs_spend_days` and `hs_spend_runs`."""

from __future__ import annotations

from .base import SPEND_DAY, SPEND_MODEL, SPEND_WATCHED


def spend_triggers_sql() -> list[str]:
    def bump(rows: str) -> str:
        day, model = SPEND_DAY.format(row=rows), SPEND_MODEL.format(row=rows)
        return (
            f"INSERT INTO hs_spend_days (day, model, changes) SELECT {day}, {model}, "
            f"count(*) FROM {rows} GROUP BY 1, 2 ORDER BY 1, 2 ON CONFLICT (day, model) "
            "DO UPDATE SET changes = hs_spend_days.changes + excluded.changes; "
            f"INSERT INTO hs_spend_runs (run_id, changes) SELECT {rows}.run_id, count(*) "
            f"FROM {rows} GROUP BY 1 ORDER BY 1 ON CONFLICT (run_id) "
            "DO UPDATE SET changes = hs_spend_runs.changes + excluded.changes;"
        )

    def bump_row(row: str) -> str:
        day, model = SPEND_DAY.format(row=row), SPEND_MODEL.format(row=row)
        return (
            f"INSERT INTO hs_spend_days (day, model, changes) VALUES ({day}, {model}, 1) "
            "ON CONFLICT (day, model) "
            "DO UPDATE SET changes = hs_spend_days.changes + excluded.changes; "
            f"INSERT INTO hs_spend_runs (run_id, changes) VALUES ({row}.run_id, 1) "
            "ON CONFLICT (run_id) "
            "DO UPDATE SET changes = hs_spend_runs.changes + excluded.changes;"
        )

    def function(name: str, body: str) -> str:
        # `SET search_path FROM CURRENT`: the counters are found where the function was
        # created (a store's schema of its own too), whatever the search_path of the
        # session whose statement fires the trigger.
        return (
            f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
            f"SET search_path FROM CURRENT AS $$ BEGIN {body} RETURN NULL; END $$"
        )

    # Statement-level with transition tables for inserts and deletes (a COPY or a
    # retention sweep bumps each group once per statement, in key order); per row for
    # updates, which PostgreSQL cannot give both a column list and transition tables.
    return [
        function("hs_spend_inserted", bump("hs_new")),
        function("hs_spend_deleted", bump("hs_old")),
        function("hs_spend_updated", f"{bump_row('OLD')} {bump_row('NEW')}"),
        "CREATE TRIGGER hs_spend_insert AFTER INSERT ON provider_calls "
        "REFERENCING NEW TABLE AS hs_new FOR EACH STATEMENT "
        "EXECUTE FUNCTION hs_spend_inserted()",
        "CREATE TRIGGER hs_spend_delete AFTER DELETE ON provider_calls "
        "REFERENCING OLD TABLE AS hs_old FOR EACH STATEMENT "
        "EXECUTE FUNCTION hs_spend_deleted()",
        f"CREATE TRIGGER hs_spend_update AFTER UPDATE OF {', '.join(SPEND_WATCHED)} "
        "ON provider_calls FOR EACH ROW EXECUTE FUNCTION hs_spend_updated()",
    ]


def drop_spend_triggers_sql() -> list[str]:
    return [
        *(f"DROP TRIGGER IF EXISTS hs_spend_{op} ON provider_calls"
          for op in ("insert", "delete", "update")),
        *(f"DROP FUNCTION IF EXISTS hs_spend_{fn}()"
          for fn in ("inserted", "deleted", "updated")),
    ]  # fmt: skip
