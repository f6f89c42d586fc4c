"""Least privilege on a PostgreSQL centre: the SQL of its follower and reader roles.

A follower may sync and follow its own origins and nothing else; a reader reads everything and
writes nothing; the owner (who ran the migrations) stays unrestricted. PostgreSQL itself holds
the rules, so a follower's plain SQL meets them as its sync does:

- grants: a follower may SELECT every table and INSERT, UPDATE, DELETE the tables a sync
  writes (never TRUNCATE, never DDL: it owns nothing); a reader may SELECT (and, through default
  privileges, every table the owner adds later);
- row-level security (enabled, not forced: the owner bypasses it) on every table a follower
  writes, with policies for every role: reads see every row; a write must touch a row of one of
  `session_user`'s own origins. An io-harness row belongs to the role its run was inserted by
  (`hs_sync_row_roles`, filled by a trigger as a run or session is inserted); a row of a
  `hs_sync_*` table with an `origin_id` to the role its origin is bound to
  (`hs_sync_origin_roles`: the first follower that registers an origin claims it, or the owner
  names it);
- triggers running as the owner (SECURITY DEFINER, their search path fixed) for what a sync
  must do to rows that are not its own: a memory entry another origin holds, replaced by a newer
  one of the same workspace and key, and the shadowed entries it lets come back; the spend
  counters every provider call bumps. An origin that is another role's is refused by a trigger
  with SQLSTATE `HS001` (`OriginOfAnotherRoleError`).

Every statement is idempotent: `apply_rules` brings a centre up to date (after an upgrade added
or changed tables too), `grant_role` a role, `revoke_role` takes one's rights back.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, text

ORIGIN_OF_ANOTHER_ROLE = "HS001"
"""The SQLSTATE a trigger raises when a follower touches an origin bound to another role."""

ROLES = "hs_sync_roles"
"""The roles the owner made (`role`, `kind`: `follower` or `reader`)."""

ORIGIN_ROLES = "hs_sync_origin_roles"
"""Which role each origin is bound to (no row: the owner's)."""

ROW_ROLES = "hs_sync_row_roles"
"""Which role inserted each central run and session (no row: the owner's)."""

ROLE_TABLES = (ROLES, ORIGIN_ROLES, ROW_ROLES)
"""The tables holding the rules' facts: the owner's alone to write."""

RUNS, SESSIONS = "runs", "sessions"

CLAIMED = (RUNS, SESSIONS)
"""The tables whose rows are claimed by the role inserting them (they hold no run column)."""


def run_columns() -> dict[str, str | None]:
    """The io-harness tables a sync writes, with the column naming each row's run (imported
    when asked: `sync`'s package imports the Store, which imports this module)."""
    from ..sync.rules import RULES

    return {rule.table: rule.run_column for rule in RULES if rule.table not in CLAIMED}


ROLE_TRIGGERS = frozenset({"hs_sync_claim", "hs_sync_guard", "hs_sync_replace", "hs_sync_uncover"})
"""The triggers the rules put on the tables a follower writes."""

POLICIES = ("hs_read", "hs_insert", "hs_update", "hs_delete")

SPEND_FUNCTIONS = (
    *("hs_spend_inserted", "hs_spend_deleted", "hs_spend_updated"),
    *("hs_run_tokens_inserted", "hs_run_tokens_deleted", "hs_run_tokens_updated"),
    *("hs_run_tokens_run_inserted", "hs_run_tokens_run_deleted"),
    *("hs_run_call_tokens_inserted", "hs_run_call_tokens_deleted"),
    *("hs_run_call_tokens_updated", "hs_run_call_tokens_run_deleted"),
)
"""The spend counters' and run token totals' (of steps and of calls) trigger functions: run as
the owner, so a follower's provider calls and steps bump counters it may not write itself."""

ME = "(session_user)::text"


def quoted(name: str) -> str:
    """`name` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def has_roles(conn: Connection) -> bool:
    """Whether the centre's current schema holds the rules' tables (roles were made here)."""
    return bool(
        conn.execute(
            text("SELECT to_regclass(quote_ident(current_schema()) || '.' || :t) IS NOT NULL"),
            {"t": ROLES},
        ).scalar()
    )


def _tables(conn: Connection) -> dict[str, frozenset[str]]:
    rows = conn.execute(
        text(
            "SELECT c.relname, a.attname FROM pg_class c "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
            "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'"
        )
    )
    found: dict[str, set[str]] = {}
    for table, column in rows:
        found.setdefault(str(table), set()).add(str(column))
    return {t: frozenset(c) for t, c in found.items()}


def follower_tables(conn: Connection) -> dict[str, str]:
    """Every table of the current schema a follower writes, with the check a row it writes
    must pass (a SQL condition on the row's columns)."""
    tables = _tables(conn)
    checks: dict[str, str] = {}
    for name in CLAIMED:
        if name in tables:
            checks[name] = _owned_row(name, f"{quoted(name)}.id")
    for name, column in run_columns().items():
        if name in tables and column is not None and column in tables[name]:
            checks[name] = _owned_row(RUNS, f"{quoted(name)}.{quoted(column)}")
    for name, columns in sorted(tables.items()):
        if name.startswith("hs_sync_") and name not in ROLE_TABLES and "origin_id" in columns:
            checks[name] = _owned_origin(f"{quoted(name)}.origin_id")
    if "hs_sync_origins" in tables:
        checks["hs_sync_origins"] = _owned_origin("hs_sync_origins.id")
    return checks


def _owned_row(table: str, column: str) -> str:
    return (
        f"EXISTS (SELECT 1 FROM {ROW_ROLES} hs_o WHERE hs_o.tbl = '{table}' "
        f"AND hs_o.row_id = {column} AND hs_o.role = {ME})"
    )


MAPPED_OWN = (
    "(hs_sync_ids.tbl NOT IN ('runs', 'sessions') OR hs_sync_ids.dest_id IS NULL OR EXISTS "
    f"(SELECT 1 FROM {ROW_ROLES} hs_o WHERE hs_o.tbl = hs_sync_ids.tbl "
    f"AND hs_o.row_id = hs_sync_ids.dest_id AND hs_o.role = {ME}))"
)
"""An id map of a run or session names one the role inserted (or was given): a follower
cannot map another origin's run into its own origin."""


def _owned_origin(column: str) -> str:
    return (
        f"EXISTS (SELECT 1 FROM {ORIGIN_ROLES} hs_o "
        f"WHERE hs_o.origin_id = {column} AND hs_o.role = {ME})"
    )


def _function(conn: Connection, schema: str, name: str, returns: str, body: str) -> None:
    conn.execute(
        text(
            f"CREATE OR REPLACE FUNCTION {name}() RETURNS {returns} LANGUAGE plpgsql "
            f"SECURITY DEFINER SET search_path = {quoted(schema)}, pg_temp AS $hs$ {body} $hs$"
        )
    )
    conn.execute(text(f"REVOKE ALL ON FUNCTION {name}() FROM PUBLIC"))


def _trigger(conn: Connection, name: str, table: str, when: str, function: str) -> None:
    conn.execute(text(f"DROP TRIGGER IF EXISTS {name} ON {quoted(table)}"))
    conn.execute(text(f"CREATE TRIGGER {name} {when} ON {quoted(table)} {function}"))


IS_FOLLOWER = f"EXISTS (SELECT 1 FROM {ROLES} WHERE role = {ME} AND kind = 'follower')"


def _rule_tables(conn: Connection) -> None:
    conn.execute(
        text(
            f"CREATE TABLE IF NOT EXISTS {ROLES} (role text PRIMARY KEY, "
            "kind text NOT NULL CHECK (kind IN ('follower', 'reader')))"
        )
    )
    conn.execute(
        text(
            f"CREATE TABLE IF NOT EXISTS {ORIGIN_ROLES} "
            "(origin_id integer PRIMARY KEY, role text NOT NULL)"
        )
    )
    conn.execute(
        text(
            f"CREATE TABLE IF NOT EXISTS {ROW_ROLES} (tbl text NOT NULL, row_id bigint NOT NULL, "
            "role text NOT NULL, PRIMARY KEY (tbl, row_id))"
        )
    )


def _triggers(conn: Connection, schema: str, tables: Iterable[str]) -> None:
    present = set(tables)
    claim_body = (
        f"BEGIN IF {IS_FOLLOWER} THEN INSERT INTO {ROW_ROLES} VALUES (TG_TABLE_NAME, NEW.id, {ME}) "
        "ON CONFLICT (tbl, row_id) DO UPDATE SET role = excluded.role; END IF; RETURN NULL; END"
    )
    _function(conn, schema, "hs_sync_claim_row", "trigger", claim_body)
    for table in CLAIMED:
        if table in present:
            _trigger(
                conn,
                "hs_sync_claim",
                table,
                "AFTER INSERT",
                "FOR EACH ROW EXECUTE FUNCTION hs_sync_claim_row()",
            )
    if "hs_sync_origins" in present:
        _function(
            conn,
            schema,
            "hs_sync_claim_origin",
            "trigger",
            f"BEGIN IF {IS_FOLLOWER} THEN INSERT INTO {ORIGIN_ROLES} VALUES (NEW.id, {ME}) "
            "ON CONFLICT (origin_id) DO NOTHING; END IF; RETURN NULL; END",
        )
        _trigger(
            conn,
            "hs_sync_claim",
            "hs_sync_origins",
            "AFTER INSERT",
            "FOR EACH ROW EXECUTE FUNCTION hs_sync_claim_origin()",
        )
        _function(
            conn,
            schema,
            "hs_sync_guard_origin",
            "trigger",
            "DECLARE holder text; BEGIN "
            f"IF NOT {IS_FOLLOWER} THEN RETURN NEW; END IF; "
            f"SELECT role INTO holder FROM {ORIGIN_ROLES} WHERE origin_id = OLD.id; "
            f"IF holder IS DISTINCT FROM {ME} OR NEW.id <> OLD.id THEN "
            "RAISE EXCEPTION 'origin % belongs to %, not to role %', OLD.uuid, "
            "coalesce('role ' || holder, 'the owner'), session_user "
            f"USING ERRCODE = '{ORIGIN_OF_ANOTHER_ROLE}'; END IF; RETURN NEW; END",
        )
        _trigger(
            conn,
            "hs_sync_guard",
            "hs_sync_origins",
            "BEFORE UPDATE",
            "FOR EACH ROW EXECUTE FUNCTION hs_sync_guard_origin()",
        )
    if "memory" in present and "hs_sync_ids" in present:
        # a newer entry of a (workspace, key) another origin holds replaces it, as a sync run
        # by the owner does itself (`state_tables.StateTables._insert_memory`)
        _function(
            conn,
            schema,
            "hs_sync_replace_memory",
            "trigger",
            "DECLARE held bigint; BEGIN "
            f"IF NOT {IS_FOLLOWER} THEN RETURN NEW; END IF; "
            "DELETE FROM memory WHERE workspace = NEW.workspace AND key = NEW.key "
            'AND created_at COLLATE "C" <= NEW.created_at COLLATE "C" RETURNING id INTO held; '
            "IF held IS NOT NULL THEN UPDATE hs_sync_ids SET dest_id = NULL "
            "WHERE tbl = 'memory' AND dest_id = held; END IF; RETURN NEW; END",
        )
        _trigger(
            conn,
            "hs_sync_replace",
            "memory",
            "BEFORE INSERT",
            "FOR EACH ROW EXECUTE FUNCTION hs_sync_replace_memory()",
        )
        # a deleted entry lets the entries it shadowed come back: their origins' next syncs
        # send them again (`rewinding.Rewinding._uncover_shadowed`, which cannot write the maps
        # of other origins as a follower)
        marks = (
            "DELETE FROM hs_sync_marks WHERE tbl = '#memory' AND origin_id IN (SELECT origin_id "
            "FROM hs_sync_ids WHERE tbl = 'memory' AND dest_id IS NULL); "
            if "hs_sync_marks" in present
            else ""
        )
        _function(
            conn,
            schema,
            "hs_sync_uncover_memory",
            "trigger",
            f"BEGIN IF {IS_FOLLOWER} THEN {marks}UPDATE hs_sync_ids SET hash = NULL "
            "WHERE tbl = 'memory' AND dest_id IS NULL AND hash IS NOT NULL; END IF; "
            "RETURN NULL; END",
        )
        _trigger(
            conn,
            "hs_sync_uncover",
            "memory",
            "AFTER DELETE",
            "FOR EACH STATEMENT EXECUTE FUNCTION hs_sync_uncover_memory()",
        )
    for name in SPEND_FUNCTIONS:
        exists = conn.execute(
            text(
                "SELECT 1 FROM pg_proc WHERE proname = :n "
                "AND pronamespace = current_schema()::regnamespace"
            ),
            {"n": name},
        ).first()
        if exists is not None:
            conn.execute(
                text(
                    f"ALTER FUNCTION {name}() SECURITY DEFINER "
                    f"SET search_path = {quoted(schema)}, pg_temp"
                )
            )


def _policies(conn: Connection, checks: dict[str, str]) -> None:
    for table, check in checks.items():
        name = quoted(table)
        conn.execute(text(f"ALTER TABLE {name} ENABLE ROW LEVEL SECURITY"))
        for policy in POLICIES:
            conn.execute(text(f"DROP POLICY IF EXISTS {policy} ON {name}"))
        writes = "true" if table == "hs_sync_origins" else check  # the guard trigger refuses
        registers = "true" if table in (*CLAIMED, "hs_sync_origins") else check
        if table == "hs_sync_ids":  # a map names only rows of the role's own
            writes = registers = f"{check} AND {MAPPED_OWN}"
        conn.execute(text(f"CREATE POLICY hs_read ON {name} FOR SELECT USING (true)"))
        conn.execute(text(f"CREATE POLICY hs_insert ON {name} FOR INSERT WITH CHECK ({registers})"))
        conn.execute(
            text(
                f"CREATE POLICY hs_update ON {name} FOR UPDATE "
                f"USING ({writes}) WITH CHECK ({writes})"
            )
        )
        conn.execute(text(f"CREATE POLICY hs_delete ON {name} FOR DELETE USING ({check})"))


def unprotected(conn: Connection) -> list[str]:
    """The tables a follower may write that lack row-level security or one of its policies
    (empty on a centre without roles): what `check` names."""
    if not has_roles(conn):
        return []
    rows = conn.execute(
        text(
            "SELECT c.relname, c.relrowsecurity, "
            "(SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid "
            "AND p.polname = ANY(:policies)) FROM pg_class c "
            "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' "
            "AND EXISTS (SELECT 1 FROM pg_roles r JOIN hs_sync_roles h ON h.role = r.rolname "
            "WHERE h.kind = 'follower' AND has_table_privilege(r.oid, c.oid, "
            "'INSERT, UPDATE, DELETE, TRUNCATE'))"
        ),
        {"policies": list(POLICIES)},
    )
    return sorted(str(t) for t, secured, policies in rows if not secured or policies < 4)


def keep_rules(conn: Connection) -> None:
    """After an upgrade, in its transaction: bring the rules up to date when the centre has
    roles (nothing otherwise)."""
    if has_roles(conn):
        apply_rules(conn)


def apply_rules(conn: Connection) -> None:
    """Bring the centre's rules up to date: the rules' tables, triggers and policies on every
    table a follower writes (those an upgrade added too), and every role's grants. Run by the
    owner, in its transaction."""
    schema = str(conn.execute(text("SELECT current_schema()")).scalar_one())
    _rule_tables(conn)
    checks = follower_tables(conn)
    _triggers(conn, schema, _tables(conn))
    _policies(conn, checks)
    conn.execute(text(f"REVOKE CREATE ON SCHEMA {quoted(schema)} FROM PUBLIC"))
    for role, kind in conn.execute(text(f"SELECT role, kind FROM {ROLES} ORDER BY role")).all():
        _grants(conn, schema, str(role), str(kind), checks)


def _grants(conn: Connection, schema: str, role: str, kind: str, checks: dict[str, str]) -> None:
    who, where = quoted(role), quoted(schema)
    conn.execute(text(f"GRANT USAGE ON SCHEMA {where} TO {who}"))
    conn.execute(text(f"GRANT SELECT ON ALL TABLES IN SCHEMA {where} TO {who}"))
    conn.execute(
        text(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {where} GRANT SELECT ON TABLES TO {who}")
    )
    if kind != "follower":
        return
    conn.execute(text(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {where} TO {who}"))
    for table in checks:
        conn.execute(text(f"GRANT INSERT, UPDATE, DELETE ON {quoted(table)} TO {who}"))


def grant_role(conn: Connection, role: str, kind: str, origin: str | None = None) -> None:
    """Create the login role `role` (or bring it up to date) as a `follower` or a `reader` of
    this centre, and apply the rules; `origin` (a UUID) binds that origin, with the runs and
    sessions it sent, to the follower."""
    exists = conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}).first()
    who = quoted(role)
    attributes = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
    conn.execute(text(f"{'ALTER' if exists else 'CREATE'} ROLE {who} {attributes}"))
    _rule_tables(conn)
    conn.execute(
        text(f"INSERT INTO {ROLES} VALUES (:r, :k) ON CONFLICT (role) DO UPDATE SET kind = :k"),
        {"r": role, "k": kind},
    )
    if kind != "follower":
        _take_back(conn, schema_of(conn), role)
        conn.execute(text(f"DELETE FROM {ORIGIN_ROLES} WHERE role = :r"), {"r": role})
        conn.execute(text(f"DELETE FROM {ROW_ROLES} WHERE role = :r"), {"r": role})
    if origin is not None:
        bind_origin(conn, origin, role)
    apply_rules(conn)


def schema_of(conn: Connection) -> str:
    """The centre's schema: the connection's current one."""
    return str(conn.execute(text("SELECT current_schema()")).scalar_one())


def bind_origin_check(conn: Connection, origin: str) -> int:
    """The id of the origin `origin` names (its UUID); `LookupError` when there is none."""
    found = conn.execute(
        text("SELECT id FROM hs_sync_origins WHERE uuid = :o"), {"o": origin}
    ).scalar()
    if found is None:
        raise LookupError(origin)
    return int(found)


def bind_origin(conn: Connection, origin: str, role: str) -> None:
    """Bind an origin (its UUID) to `role`, with the runs and sessions it sent: those that
    are the owner's or the origin's former holder's (never another role's)."""
    found = bind_origin_check(conn, origin)
    before = conn.execute(
        text(f"SELECT role FROM {ORIGIN_ROLES} WHERE origin_id = :o"), {"o": found}
    ).scalar()
    conn.execute(
        text(
            f"INSERT INTO {ORIGIN_ROLES} VALUES (:o, :r) "
            "ON CONFLICT (origin_id) DO UPDATE SET role = :r"
        ),
        {"o": found, "r": role},
    )
    conn.execute(
        text(
            f"INSERT INTO {ROW_ROLES} SELECT tbl, dest_id, :r FROM hs_sync_ids "
            "WHERE origin_id = :o AND tbl IN ('runs', 'sessions') AND dest_id IS NOT NULL "
            f"ON CONFLICT (tbl, row_id) DO UPDATE SET role = :r WHERE {ROW_ROLES}.role = :b"
        ),
        {"o": found, "r": role, "b": before},
    )


def _take_back(conn: Connection, schema: str, role: str) -> None:
    who, where = quoted(role), quoted(schema)
    conn.execute(text(f"REVOKE ALL ON ALL TABLES IN SCHEMA {where} FROM {who}"))
    conn.execute(text(f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {where} FROM {who}"))
    conn.execute(text(f"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {where} FROM {who}"))
    conn.execute(
        text(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {where} REVOKE ALL ON TABLES FROM {who}")
    )
    conn.execute(text(f"REVOKE ALL ON SCHEMA {where} FROM {who}"))


def revoke_role(conn: Connection, role: str) -> bool:
    """Take back every right `role` has on this centre (its origins, runs and sessions go
    back to the owner); the role itself stays, for other databases of the cluster. Whether it
    was one of this centre's roles."""
    if not has_roles(conn):
        return False
    known = conn.execute(text(f"DELETE FROM {ROLES} WHERE role = :r"), {"r": role}).rowcount
    conn.execute(text(f"DELETE FROM {ORIGIN_ROLES} WHERE role = :r"), {"r": role})
    conn.execute(text(f"DELETE FROM {ROW_ROLES} WHERE role = :r"), {"r": role})
    exists = conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}).first()
    if exists is not None:
        _take_back(conn, schema_of(conn), role)
    return bool(known)
