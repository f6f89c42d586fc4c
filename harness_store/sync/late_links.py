"""Links set once the row they name is sent (a child run's parent sent later in the pass, a
session's head turn), all of a table's at once; and a slice's end, which commits the links,
maps and marks settled so far."""

from __future__ import annotations

from .finding import CentralIds
from .id_maps import IdMaps
from .rows import model_table
from .rules import Rule

_KEY_COLUMN = {"run": "run_id", "id": "id"}
"""The column that finds a central row of a table keyed by its run or its id."""


class LateLinks(IdMaps):
    """Setting the links that wait for their row, and ending a slice."""

    def _apply_fixups(self, *, final: bool) -> None:
        """Set the links that named rows sent later in this sync (a child run's parent sent
        in the same batch, a session's head turn): the backend sets each table's column for
        all of its rows at once (`Backend.update_rows`: one statement on PostgreSQL), not
        one per row. Before the `final` call (a slice's end) the links whose row is not
        sent yet wait for a later slice."""
        batches: dict[tuple[str, str], list[tuple[int, ...]]] = {}
        rules: dict[str, Rule] = {}
        waiting = []
        asked: dict[str, set[int]] = {}
        for fixup in self.fixups:
            asked.setdefault(fixup[3], set()).add(fixup[4])
        for target, sources in asked.items():  # a statement a chunk, not one a link
            ids = self.ids[target]
            if isinstance(ids, CentralIds):
                ids.fetch(sources)
        for fixup in self.fixups:
            rule, (dest_id, sub), column, target, source, key = fixup
            mapped = self.ids[target].get(source)
            if mapped is None and not final:
                waiting.append(fixup)
                continue
            self.waiting[(rule.table, key)] -= 1
            if mapped is None:
                self.counts.orphans[f"{rule.table}.{column}"] += 1
                continue
            rules[rule.table] = rule
            found = (dest_id, sub) if rule.key == "rowid" else (dest_id,)
            batches.setdefault((rule.table, column), []).append((*found, mapped))
        for (name, column), rows in batches.items():
            rule = rules[name]
            keys = ("run_id", "step") if rule.key == "rowid" else (_KEY_COLUMN[rule.key],)
            self.backend.update_rows(self.dst, model_table(rule), keys, [column], rows)
        self.fixups = waiting

    def _end_slice(self) -> None:
        """Commit the current slice with its settled links, maps and marks, and begin the
        next."""
        assert self.slices is not None
        self._apply_fixups(final=False)
        self._save(final=False)
        self.slices.commit()
        self._dst = None  # the next slice begins at its first statement
        self.in_slice = 0
        self._shed()
