"""A sync's append tables (steps, provider calls, events, …): sent from the high-water mark on
through the backend's bulk path, links remapped as the rows stream; runs whose rows were
cleared in the source (an archive) sent again."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from sqlalchemy import Column, Table, delete, func, select

from ..models.sync import IDS
from .finding import CentralIds
from .origin_state import (
    ANCHOR_MARK,
    CHUNK,
    TEXT_MARK,
    OriginState,
    anchor_columns,
    chunks,
    nonempty,
    text_columns,
)
from .rows import digest, event_json_for, model_table, source_columns
from .rules import RUNS, Rule


class AppendTables(OriginState):
    """Sending the append tables of one origin."""

    def _sync_append(self, rule: Rule) -> None:
        table = model_table(rule)
        columns = source_columns(rule, self.have)
        if self.adopt:
            self._adopt_append(table, columns)
            return
        assert rule.run_column is not None
        hwm = self.hwm.get(rule.table, 0)
        source_run = table.c[rule.run_column]
        texts = text_columns(columns)
        reload = set(self.reload_runs)
        text_total = 0
        kept = self.hwm.get(TEXT_MARK + rule.table)
        # texts are counted again only when rows sent before changed (state rows do with
        # an archive), not when rows were only added
        again = self.scan_texts and self.old_changed
        if hwm and texts and (again or kept is None):
            text_total = int(
                self.src.execute(
                    select(func.coalesce(func.sum(nonempty(texts)), 0)).where(table.c.id <= hwm)
                ).scalar_one()
            )
            if kept is not None and kept != text_total:
                reload |= self._cleared_runs(table, source_run, texts, hwm)
        elif kept is not None:
            text_total = kept
        reload -= set(self.gone_runs)
        reload -= self.held  # sent whole once released
        if reload and hwm:
            dest_runs = [self.ids[RUNS][r] for r in reload if r in self.ids[RUNS]]
            for part in chunks(sorted(dest_runs)):
                self.dst.execute(delete(table).where(table.c[rule.run_column].in_(part)))
            for runs in chunks(sorted(reload)):  # a statement names at most a chunk of ids
                statement = (
                    select(*columns)
                    .where(source_run.in_(runs), table.c.id <= hwm)
                    .order_by(table.c.id)
                )
                self._send(rule, table, statement, reloaded=True)
        if self.tops.get(rule.table, 0) > hwm:
            statement = select(*columns).where(table.c.id > hwm).order_by(table.c.id)
            top, sent_texts, anchor = self._send(
                rule, table, statement, reloaded=False, texts_before=text_total
            )
            if top > hwm:
                self.hwm[rule.table] = top
                self.hwm[ANCHOR_MARK + rule.table] = anchor
            text_total += sent_texts
        if texts and self.hwm.get(rule.table, 0):
            self.hwm[TEXT_MARK + rule.table] = text_total

    def _adopt_append(self, table: Table, columns: list[Column[Any]]) -> None:
        """The marks a sync sending every row of `table` would leave, its rows being in the
        destination already (`adopt`): the top id, the facts of the row there, and how many
        of the texts up to it are non-empty."""
        top = self.tops.get(table.name, 0)
        if not top:
            return
        self.hwm[table.name] = top
        facts = self._raw(select(*anchor_columns(columns)).where(table.c.id == top)).fetchone()
        self.hwm[ANCHOR_MARK + table.name] = digest(tuple(facts))
        texts = text_columns(columns)
        if texts:
            self.hwm[TEXT_MARK + table.name] = int(
                self.src.execute(
                    select(func.coalesce(func.sum(nonempty(texts)), 0)).where(table.c.id <= top)
                ).scalar_one()
            )

    def _cleared_runs(
        self, table: Table, source_run: Any, texts: list[Column[Any]], hwm: int
    ) -> set[int]:
        """The source runs whose rows of `table` (up to `hwm`) hold another number of
        non-empty text values than their central rows: cleared since (an archive). The runs
        the centre maps are compared a chunk at a time in key order, their counts read on
        both sides a chunk a statement, so memory holds a chunk, whatever the source's size."""
        count = func.sum(nonempty(texts))
        central_run = table.c[source_run.name]
        mapped = select(IDS.c.src_id, IDS.c.dest_id).where(
            IDS.c.origin_id == self.origin_id, IDS.c.tbl == RUNS, IDS.c.dest_id.is_not(None)
        )
        cleared: set[int] = set()
        low: int | None = None
        while True:
            statement = mapped if low is None else mapped.where(IDS.c.src_id > low)
            part = {
                int(s): int(d)
                for s, d in self.backend.driver_rows(
                    self.central, statement.order_by(IDS.c.src_id).limit(CHUNK)
                ).fetchall()
            }
            if not part:
                return cleared
            first, low = min(part), max(part)
            here = {
                int(run): int(n or 0)
                for run, n in self._raw(
                    select(source_run, count)
                    .where(source_run.between(first, low), table.c.id <= hwm)
                    .group_by(source_run)
                ).fetchall()
            }
            there = {
                int(run): int(n or 0)
                for run, n in self.backend.driver_rows(
                    self.dst,
                    select(central_run, count)
                    .where(central_run.in_(sorted(part.values())))
                    .group_by(central_run),
                ).fetchall()
            }
            cleared.update(
                run for run, dest in part.items() if here.get(run, 0) != there.get(dest, 0)
            )

    def _send(
        self,
        rule: Rule,
        table: Table,
        statement: Any,
        *,
        reloaded: bool,
        texts_before: int | None = None,
    ) -> tuple[int, int, int]:
        """Write rows of an append table into the destination as they are read, a batch at a
        time (on PostgreSQL one COPY a batch, the central ids its links name read before the
        COPY starts: a statement inside a COPY would wait on it for ever); the highest id
        read, how many non-empty text values were read, and the hash of the last row's facts
        (`ANCHOR_MARK`).

        Written in slices (`slices`), each batch is inserted and its marks set as a
        completed send would set them (`texts_before`: the non-empty texts below the rows
        sent), so the slice that commits it commits them; rows sent again (`reloaded`) are
        never split from their run's deletion."""
        top = 0
        texts_read = 0
        last: Any = None
        nullable = {c: bool(table.c[c].nullable) for c in rule.links}
        cursor = self._raw(statement)
        target = self.counts.updated if reloaded else self.counts.inserted
        keys = [d[0] for d in cursor.description]
        names = [c for c in keys if c != "id"]
        links = [
            (names.index(c), self.ids[t], nullable[c]) for c, t in rule.links.items() if c in names
        ]
        id_at = keys.index("id")
        keep = [i for i, c in enumerate(keys) if c != "id"]
        present = [table.c[k] for k in keys]
        text_at = [keys.index(c.name) for c in text_columns(present)]
        anchor_at = [keys.index(c.name) for c in anchor_columns(present)]
        event_at = (
            (names.index("json"), names.index("run_id")) if rule.table == "run_events" else None
        )
        run_ids = self.ids[RUNS]
        held = self.held
        own_at = names.index(rule.run_column) if held and rule.run_column in names else None

        def converted(batch: list[Any]) -> list[tuple[Any, ...]]:
            """One fetched batch's rows as they are written, counted: remapped a column at
            a time, each id the column names looked up once (the rows come in id order)."""
            nonlocal top, texts_read, last
            top = max(top, int(batch[-1][id_at]))
            last = batch[-1]
            for i in text_at:
                texts_read += sum(map(bool, map(itemgetter(i), batch)))
            rows = batch
            if own_at is not None:  # a held run's rows wait: sent whole once released
                own = keep[own_at]
                rows = [row for row in batch if row[own] not in held]
            columns = [list(map(itemgetter(i), rows)) for i in keep]
            orphaned: set[int] = set()
            for at, ids, may_be_null in links:
                column = columns[at]
                named = {v for v in column if v is not None}
                if isinstance(ids, CentralIds):  # the central ids it names, a statement a chunk
                    ids.fetch(v for v in named if isinstance(v, int))
                mapped = {v: ids.get(v) for v in named}
                if not may_be_null:
                    orphaned.update(
                        n for n, v in enumerate(column) if v is not None and mapped[v] is None
                    )
                columns[at] = [None if v is None else mapped[v] for v in column]
            if event_at is not None:
                columns[event_at[0]] = [event_json_for(v, run_ids) for v in columns[event_at[0]]]
            out = list(zip(*columns, strict=True)) if columns else [() for _ in rows]
            if orphaned:
                self.counts.orphans[rule.table] += len(orphaned)
                out = [row for n, row in enumerate(out) if n not in orphaned]
            target[rule.table] += len(out)
            self._sent(len(out))
            return out

        if self.slices is None or reloaded or texts_before is None:
            while batch := cursor.fetchmany(self.batch_size):
                # a batch is converted, and the central ids it names read, before it is
                # written: never a statement on the centre's connection inside a COPY
                values = converted(batch)
                if values:
                    self.backend.bulk_insert(self.dst, table, names, values)
                self._shed()  # a new origin's: the central ids read for the batch go
        else:
            while batch := cursor.fetchmany(self.slice_rows):
                values = converted(batch)
                if values:
                    self.backend.bulk_insert(self.dst, table, names, values)
                self.hwm[rule.table] = top
                self.hwm[ANCHOR_MARK + rule.table] = digest(tuple(last[i] for i in anchor_at))
                if text_at:
                    self.hwm[TEXT_MARK + rule.table] = texts_before + texts_read
                self._slice_done(len(batch))
        anchor = digest(tuple(last[i] for i in anchor_at)) if last is not None else 0
        return top, texts_read, anchor
