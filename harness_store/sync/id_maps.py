"""One origin's id maps and high-water marks: loaded from the centre (a table's map only when
its rows changed, the central ids a link asks for as it asks), and saved with the rows they
map, an unsettled row's map as `UNSETTLED` until it settles."""

from __future__ import annotations

from functools import partial

from sqlalchemy import ColumnElement, delete, func, insert, select

from ..models.sync import IDS, MARKS
from .append_tables import AppendTables
from .finding import CentralIds
from .origin_state import UNSETTLED
from .rows import model_table
from .rules import RULES, RUNS
from .whole_compare import WholeCompare

MAP_COLUMNS = ("origin_id", "tbl", "src_id", "dest_id", "dest_sub", "hash")
"""An id map's columns, its key first (`IDS`)."""


class IdMaps(WholeCompare, AppendTables):
    """Reading and saving one origin's id maps and marks."""

    def _load(self) -> None:
        """The marks, and the central ids of the referenced tables as links ask for them
        (`finding.CentralIds`); a table's id map is read only when its rows changed, and
        of a table read in part only the entries of its rows read."""
        for tbl in self.ids:
            self.ids[tbl] = CentralIds(partial(self._central_ids, tbl))
        marks = self.central.execute(
            select(MARKS.c.tbl, MARKS.c.hwm).where(MARKS.c.origin_id == self.origin_id)
        )
        self.hwm = {str(tbl): int(hwm) for tbl, hwm in marks}
        self.hwm_loaded = dict(self.hwm)
        self.hwm_saved = dict(self.hwm)

    def _central_ids(self, tbl: str, keys: list[int]) -> list[tuple[int, int]]:
        """The central ids of the source ids `keys` of `tbl` (those the centre maps)."""
        rows = self.central.execute(
            select(IDS.c.src_id, IDS.c.dest_id).where(
                IDS.c.origin_id == self.origin_id,
                IDS.c.tbl == tbl,
                # the range lets PostgreSQL seek the key's third column on the index (a list
                # alone is a filter on every entry of the table while it has no statistics)
                IDS.c.src_id.between(min(keys), max(keys)),
                IDS.c.src_id.in_(keys),
                IDS.c.dest_id.is_not(None),
            )
        )
        return [(int(s), int(d)) for s, d in rows]

    def _read_maps(self, which: ColumnElement[bool]) -> None:
        rows = self.central.execute(
            select(IDS.c.tbl, IDS.c.src_id, IDS.c.dest_id, IDS.c.dest_sub, IDS.c.hash).where(
                IDS.c.origin_id == self.origin_id, which
            )
        )
        for tbl, src_id, dest_id, dest_sub, hashed in rows:
            self.maps.setdefault(tbl, {})[int(src_id)] = [dest_id, dest_sub, hashed]
            if tbl in self.ids and dest_id is not None:
                self.ids[tbl][int(src_id)] = int(dest_id)

    def _append_tops(self) -> dict[str, int]:
        """The highest id of every append table, in one query: a table whose top is at its
        mark has nothing new (the common case of a sync with nothing new)."""
        tables = [model_table(r) for r in RULES if r.kind == "append" and r.table in self.have]
        if not tables:
            return {}
        tops = self.src.execute(
            select(*(select(func.max(t.c.id)).scalar_subquery().label(t.name) for t in tables))
        ).one()
        return {t.name: int(top or 0) for t, top in zip(tables, tops, strict=True)}

    def _unsettled(self, key: tuple[str, int]) -> bool:
        return self.waiting[key] > 0 or (key[0] == RUNS and key[1] in self.reloading)

    def _write_new_maps(self) -> None:
        """Insert the id maps of the rows sent since the last write (`map_new`)."""
        if self.map_new:
            o = self.origin_id
            self.backend.bulk_insert(
                self.dst,
                IDS,
                MAP_COLUMNS,
                ((o, m["t"], m["s"], m["d"], m["d2"], m["h"]) for m in self.map_new),
            )
        self.map_new = []

    def _save(self, *, final: bool) -> None:
        """Write the id maps' changes and the high-water marks. Before the `final` save (a
        slice's) an unsettled row's map is saved `UNSETTLED` (a run to be sent again with
        the goal it had), and its own once it settles."""
        o = self.origin_id
        if final:
            self._finding_marks()
        for key in list(self.flushed_unsettled):
            if final or not self._unsettled(key):
                self.flushed_unsettled.discard(key)
                entry = self.maps.get(key[0], {}).get(key[1])
                if entry is not None:
                    self.map_changed.append(
                        {"t": key[0], "s": key[1], "d": entry[0], "d2": entry[1], "h": entry[2]}
                    )
        if not final:
            for changes in (self.map_new, self.map_changed):
                for at, change in enumerate(changes):
                    key = (str(change["t"]), int(change["s"]))
                    if change["h"] is None or not self._unsettled(key):
                        continue
                    changes[at] = change = {**change, "h": UNSETTLED}
                    if key[0] == RUNS and key[1] in self.reloading:
                        change["d2"] = self.reloading[key[1]]
                    self.flushed_unsettled.add(key)
        self._write_new_maps()
        self.backend.update_rows(
            self.dst,
            IDS,
            MAP_COLUMNS[:3],
            MAP_COLUMNS[3:],
            [(o, m["t"], m["s"], m["d"], m["d2"], m["h"]) for m in self.map_changed],
        )
        self.backend.delete_rows(
            self.dst, IDS, MAP_COLUMNS[:3], [(o, m["t"], m["s"]) for m in self.map_gone]
        )
        self.map_new, self.map_changed, self.map_gone = [], [], []
        if self.hwm == self.hwm_saved:
            return
        self.dst.execute(delete(MARKS).where(MARKS.c.origin_id == o))
        if self.hwm:
            self.dst.execute(
                insert(MARKS),
                [{"origin_id": o, "tbl": t, "hwm": h} for t, h in sorted(self.hwm.items())],
            )
        self.hwm_saved = dict(self.hwm)
