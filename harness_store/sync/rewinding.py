"""A source whose history went back since the last sync (a backup restored over it): found
here; its origin is then forgotten centrally (`WholeCompare._forget`) and sent again in full."""

from __future__ import annotations

from sqlalchemy import and_, delete, select, update

from ..models.sync import IDS, MARKS
from .id_maps import IdMaps
from .origin_state import ANCHOR_MARK, STATE_MARK, anchor_columns
from .rows import digest, model_table, source_columns_of
from .rules import RULES


class Rewinding(IdMaps):
    """Finding a rewound source."""

    def _rewound(self) -> str | None:
        """Why the source's history went back since the last sync (a backup restored over it,
        in place or by rename), or None: an append table's id sequence below what was sent,
        or the row at its high-water mark not the one sent under that id."""
        marked = [
            model_table(r)
            for r in RULES
            if r.kind == "append" and r.table in self.have and self.hwm.get(r.table, 0) > 0
        ]
        if not marked:
            return None
        has_sequence = self.src.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'"
        ).first()
        sequences = (
            {
                str(n): int(v)
                for n, v in self.src.exec_driver_sql("SELECT name, seq FROM sqlite_sequence")
            }
            if has_sequence
            else {}
        )
        for table in marked:
            hwm = self.hwm[table.name]
            sequence = sequences.get(table.name, 0)
            if sequence < hwm:
                return f"{table.name} ids restart at {sequence}, below the {hwm} already synced"
            kept = self.hwm.get(ANCHOR_MARK + table.name)
            if kept is None:
                continue
            columns = anchor_columns(source_columns_of(table, self.have))
            row = self._raw(select(*columns).where(table.c.id == hwm)).fetchone()
            if row is not None and digest(tuple(row)) != kept:
                return f"row {hwm} of {table.name} is not the row synced under that id"
        return None

    def _uncover_shadowed(self) -> None:
        """Let other origins' memory entries a deleted one shadowed come back: their id maps
        forget the hash and their memory mark goes, so their next sync sends them again
        (unless another entry still holds the key and is newer)."""
        shadowed = and_(
            IDS.c.tbl == "memory", IDS.c.dest_id.is_(None), IDS.c.origin_id != self.origin_id
        )
        others = [
            int(o)
            for o in self.dst.execute(select(IDS.c.origin_id).where(shadowed).distinct()).scalars()
        ]
        if not others:
            self.uncovered = False
            return
        self.dst.execute(update(IDS).where(shadowed).values(hash=None))
        self.dst.execute(
            delete(MARKS).where(MARKS.c.origin_id.in_(others), MARKS.c.tbl == STATE_MARK + "memory")
        )
