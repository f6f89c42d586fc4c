"""What the command's listings show: runs a page at a time (newest first, by status or
origin) and how many there are, the memory workspaces, the rows in each table, the journal mode
and the database's size.

`Listings` reads them over a Store, through the Store's named ways to the database, so that
every number `harness-store` prints is read in the Store's package; they are the command's
(and the OTLP exporter's, which pages through the unfinished runs), not a part of the Store's
API, which is upstream's."""

from __future__ import annotations

from sqlalchemy import ColumnElement, func, or_, select, table

from .. import models as m
from ..formats import i64, text, u32
from ..models.sync import IDS, ORIGINS, recorded_path
from ..records import RunListing
from .arguments import checked_arguments
from .release_tables import OlderStoreMixin
from .unreadable import check_integers, integer_columns


@checked_arguments
class Listings:
    """The command's listings over `store` (see the module): `run_page`, `count_runs`,
    `memory_workspaces`, `row_counts`, `journal_mode`, `database_bytes`."""

    def __init__(self, store: OlderStoreMixin) -> None:
        self.store = store

    def run_page(
        self,
        *,
        status: str | None = None,
        origin: str | None = None,
        before: int | None = None,
        limit: int = 500,
    ) -> list[RunListing]:
        """At most `limit` runs, newest first, with ids below `before` (None: from the
        newest): the next page of a listing that passes the last id it got. `status` keeps
        the runs with that status; `origin` (a synced store's origin UUID or the path it was
        seen at) the runs synced from it."""
        r, o = m.Run, m.RunOutcome
        statement = (
            select(
                r.id,
                r.parent_run_id,
                r.depth,
                r.status,
                r.outcome,
                r.started_at,
                o.duration_ms,
                o.success,
                r.goal,
            )
            .outerjoin(o, o.run_id == r.id)
            .where(*self._run_filters(status, origin))
            .order_by(r.id.desc())
            .limit(u32(limit, "limit"))
        )
        if before is not None:
            statement = statement.where(r.id < i64(before, "before"))
        with self.store._read() as conn:
            rows = conn.execute(statement).all()
        check_integers(rows, integer_columns(statement.selected_columns), 0)
        return [
            RunListing(run_id, parent, depth, state, outcome, started, duration,
                       None if success is None else bool(success), goal)
            for run_id, parent, depth, state, outcome, started, duration, success, goal in rows
        ]  # fmt: skip

    def count_runs(self, *, status: str | None = None, origin: str | None = None) -> int:
        """How many runs the store holds (with `status`, synced from `origin`, when given)."""
        statement = select(func.count()).select_from(m.Run)
        return int(self.store._scalar(statement.where(*self._run_filters(status, origin))))

    def _run_filters(self, status: str | None, origin: str | None) -> list[ColumnElement[bool]]:
        filters = []
        if status is not None:
            filters.append(m.Run.status == text(status, "status"))
        if origin is not None:
            filters.append(runs_of_origin(text(origin, "origin")))
        return filters

    def memory_workspaces(self) -> list[str]:
        """Every workspace that holds memory, in order."""
        w = m.Memory.workspace
        return self.store._rows(select(w).distinct().order_by(w), str)

    def row_counts(self) -> dict[str, int]:
        """The rows in each of the store's tables (those of any release, and any others it
        holds; not SQLite's own nor harness_store's revision stamp)."""
        from ..schema.detect import read_tables

        with self.store._read() as conn:
            return {
                name: int(conn.execute(select(func.count()).select_from(table(name))).scalar_one())
                for name in read_tables(conn)
            }

    def journal_mode(self) -> str | None:
        """SQLite's journal mode as the Store's connection reports it (`wal`, `delete`, …);
        None on PostgreSQL, which has none."""
        with self.store._read() as conn:
            return self.store._backend.journal_mode(conn)

    def database_bytes(self) -> int:
        """The database's size: a SQLite file's pages, a PostgreSQL database's size on
        disk."""
        with self.store._read() as conn:
            return self.store._backend.database_bytes(conn)


def runs_of_origin(origin: str) -> ColumnElement[bool]:
    """A WHERE on `runs` keeping the central runs of `origin` (its UUID, or the path it was
    last seen at), for queries that list runs (`harness-store runs --origin`)."""
    of_origin = (
        select(IDS.c.dest_id)
        .join(ORIGINS, ORIGINS.c.id == IDS.c.origin_id)
        .where(
            IDS.c.tbl == "runs",
            IDS.c.hash.is_not(None),
            or_(
                ORIGINS.c.uuid == origin,
                ORIGINS.c.path == origin,
                ORIGINS.c.path == recorded_path(origin),
            ),
        )
    )
    return m.Run.id.in_(of_origin)
