"""The quarantine check of `Store.check` on a centre: each run a sync holds back in
`hs_sync_quarantine` (a row holding a value the centre cannot hold as it is, or a run
waiting for such a run) is a finding, named by its origin's path, its run id in that source,
and the table, row and column of the value, with what is wrong."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from sqlalchemy import Connection, select

from ..models.sync import ORIGINS, QUARANTINE
from ..records.health import Finding, FindingKind

QUARANTINE_TABLE = QUARANTINE.name

UPSTREAM = (
    "the run is not in the centre (as it was when last sent, if it was): a sync keeps its rows "
    "byte-exact in hs_sync_quarantine and sends it whole once the source's row is repaired"
)


@dataclass(frozen=True)
class QuarantinedRun:
    """A run a centre holds in quarantine, as `quarantined` reads it."""

    origin: str
    """The origin's UUID."""
    source: str
    """The origin's path, as last synced."""
    run: int
    """The run's id in its source."""
    table: str
    row: str | None
    column: str | None
    problem: str
    first_seen: str
    last_seen: str
    raw: bytes

    def rows(self) -> dict[str, list[dict[str, tuple[str, bytes | None]]]]:
        """Every row of the run as its source held it: per table, each row's values by
        column, each value its SQLite storage class and its bytes (`decode_rows`)."""
        return decode_rows(self.raw)

    def describe(self) -> str:
        """One line for a person."""
        where = f"{self.table}.{self.column} of the row {self.row} " if self.column else ""
        return f"{self.source} run {self.run}: {where}{self.problem}"


def decode_rows(raw: bytes) -> dict[str, list[dict[str, tuple[str, bytes | None]]]]:
    """The rows `encode_rows` kept: per table, each row's values by column, as (storage
    class, bytes); ("null", None) for NULL."""
    kept = json.loads(raw.decode("utf-8"))
    out: dict[str, list[dict[str, tuple[str, bytes | None]]]] = {}
    for name, part in kept["tables"].items():
        out[name] = [
            {
                column: ("null", None) if v is None else (str(v[0]), base64.b64decode(v[1]))
                for column, v in zip(part["columns"], row, strict=True)
            }
            for row in part["rows"]
        ]
    return out


def quarantine_findings(conn: Connection) -> list[Finding]:
    """One finding per quarantined run, oldest origin first."""
    return [
        Finding(
            FindingKind.QUARANTINED,
            held.table,
            f"run {held.run} of {held.source} (origin {held.origin}) is held in quarantine since "
            f"{held.first_seen}: "
            + (
                f"{held.table}.{held.column} of the row {held.row} {held.problem}"
                if held.column
                else held.problem
            ),
            UPSTREAM,
            key="run_id",
            rows=(held.run,),
            count=1,
        )
        for held in read_quarantine(conn)
    ]


def read_quarantine(conn: Connection) -> list[QuarantinedRun]:
    """Every run the centre `conn` holds in quarantine, by origin and run."""
    rows = conn.execute(
        select(QUARANTINE, ORIGINS.c.uuid, ORIGINS.c.path)
        .join(ORIGINS, ORIGINS.c.id == QUARANTINE.c.origin_id)
        .order_by(QUARANTINE.c.origin_id, QUARANTINE.c.run_id)
    )
    return [
        QuarantinedRun(
            origin=r.uuid,
            source=r.path,
            run=int(r.run_id),
            table=r.tbl,
            row=r.row_key,
            column=r.col,
            problem=r.problem,
            first_seen=r.first_seen,
            last_seen=r.last_seen,
            raw=bytes(r.raw),
        )
        for r in rows
    ]
