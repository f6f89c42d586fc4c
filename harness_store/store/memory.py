"""Durable cross-run memory: per-workspace entries under upstream's caps, as of io-harness 0.66.

A workspace holds at most `MEMORY_MAX_ENTRIES` entries and `MEMORY_MAX_CHARS` characters; a
value longer than `MEMORY_MAX_ENTRY_CHARS` is cut and marked, never refused. `memory_put` writes
a `fact` that is not pinned (0.30), refuses to overwrite a pinned entry (0.30), and first takes
the run's restore point of the key in `memory_snapshots` (0.36). A write that breaks a cap evicts
the least-proven entries — fewest distinct runs that recalled them, then the oldest last recall
(never recalled first), then `created_at`, then `id` (0.56) — never a pinned one nor the one just
written; pinned entries still count towards the caps. Upstream runs these steps as separate
statements; here they are one transaction, so a crash never leaves a workspace over its caps or a
restore point without its write.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, distinct, func, insert, null, select, text, update

from .. import models as m
from ..errors import InvalidValueError
from ..formats import MEMORY_TRUNCATED, is_int, u32
from ..formats import text as check_text
from ..records import (
    MemoryEntry,
    MemoryForget,
    MemoryLimits,
    MemoryRecall,
    MemorySnapshot,
    MemoryWrite,
)
from .marks import reads, writes
from .release_tables import OlderStoreMixin
from .step_reads import memory_entry as point_entry

FACT = "fact"
DECISION = "decision"

_ENTRY = m.table_of(m.Memory).alias("entry")
"""The memory table under another name, as eviction reads it: a Core alias (`orm.aliased`
would configure every mapper on the first put), so that a DELETE of memory can take its rows
from a SELECT of the entries without SQLAlchemy correlating the two."""

# `ON CONFLICT … DO NOTHING` is upstream's `INSERT OR IGNORE` in a form SQLite and PostgreSQL
# both parse; the unique index memory_snapshots_entry is the first-write-per-run guard.
_SNAPSHOT_TEXT = text(
    "INSERT INTO memory_snapshots (run_id, workspace, key, step, before, kind, state) "
    "SELECT :run_id, :workspace, :key, :step, m.value, m.kind, 'text' "
    "FROM memory m WHERE m.workspace = :workspace AND m.key = :key "
    "ON CONFLICT (run_id, workspace, key) DO NOTHING"
)
_SNAPSHOT_ABSENT = text(
    "INSERT INTO memory_snapshots (run_id, workspace, key, step, before, kind, state) "
    "VALUES (:run_id, :workspace, :key, :step, NULL, NULL, 'absent') "
    "ON CONFLICT (run_id, workspace, key) DO NOTHING"
)
_DROP_SNAPSHOT = text(
    "DELETE FROM memory_snapshots WHERE run_id = :run_id AND workspace = :workspace AND key = :key"
)
# The pin guard is in the statement, so no writer can slip between a check and the write.
# `COALESCE(pinned, 0) <> 1` is upstream's `pinned IS NOT 1` (a pre-0.30 NULL is not a pin).
_UPSERT = (
    "INSERT INTO memory (workspace, key, value, run_id, step, created_at, kind, pinned) "
    "VALUES (:workspace, :key, :value, :run_id, :step, {now}, :kind, 0) "
    "ON CONFLICT (workspace, key) DO UPDATE SET value = excluded.value, "
    "run_id = excluded.run_id, step = excluded.step, created_at = excluded.created_at, "
    "kind = excluded.kind WHERE COALESCE(memory.pinned, 0) <> 1"
)


_FORGET_POINT = text(
    "INSERT INTO memory_snapshots (run_id, workspace, key, step, before, kind, state) "
    "VALUES (:run_id, :workspace, :key, :step, :before, :kind, 'text') "
    "ON CONFLICT (run_id, workspace, key) DO NOTHING"
)
KINDS = (FACT, DECISION)
SIMILAR_PERCENT = 60
"""How much of two notes' words must be shared for one to restate the other (0.57)."""


def truncate_value(value: str, cap: int) -> str:
    """Cut a value to `cap` characters ending in the marker, as upstream: a cap shorter than
    the marker leaves the marker alone."""
    if len(value) <= cap:
        return value
    return value[: max(cap - len(MEMORY_TRUNCATED), 0)] + MEMORY_TRUNCATED


def memory_tokens(value: str) -> set[str]:
    """The words of a note that count for similarity: runs of letters and digits of three
    characters or more, lowercased."""
    words: list[str] = []
    word: list[str] = []
    for ch in value + " ":
        if ch.isalnum():
            word.append(ch)
        elif word:
            words.append("".join(word))
            word = []
    return {w.lower() for w in words if len(w) >= 3}


def memory_overlap(a: set[str], b: set[str]) -> tuple[int, int]:
    """Shared words and words in either note."""
    shared = len(a & b)
    return shared, len(a) + len(b) - shared


def memory_is_similar(a: set[str], b: set[str]) -> bool:
    """Whether two notes share at least 60% of their words."""
    shared, total = memory_overlap(a, b)
    return total > 0 and shared * 100 >= total * SIMILAR_PERCENT


def check_limits(limits: MemoryLimits) -> MemoryLimits:
    """Caps are counts: negative ones are refused (upstream's are `usize`)."""
    for name in ("max_entries", "max_chars", "max_entry_chars"):
        value = getattr(limits, name)
        if not is_int(value) or value < 0:
            raise InvalidValueError(f"MemoryLimits.{name} must be an int >= 0, got {value!r}")
    return limits


def check_kind(kind: str) -> str:
    """A memory kind: `fact` or `decision`."""
    if kind not in KINDS:
        raise InvalidValueError(f"memory kind must be 'fact' or 'decision', got {kind!r}")
    return kind


def _in_eviction_order(workspace: str, *shown: Any) -> Any:
    """`shown` (columns of `_ENTRY`) of a workspace's entries in upstream's eviction order
    (0.56): fewest distinct recalling runs, oldest last recall (never recalled first), then
    `created_at`, then `id`."""
    entry, recall = _ENTRY, m.table_of(m.MemoryRecall).alias("recall")
    of_entry = (recall.c.workspace == entry.c.workspace, recall.c.key == entry.c.key)
    runs = select(func.count(distinct(recall.c.run_id))).where(*of_entry).scalar_subquery()
    last_recall = select(func.max(recall.c.at)).where(*of_entry).scalar_subquery()
    return (
        select(*shown)
        .where(entry.c.workspace == workspace)
        .order_by(runs, last_recall.asc().nulls_first(), entry.c.created_at, entry.c.id)
    )


def eviction_candidates(workspace: str) -> Any:
    """A workspace's entries in eviction order: key, length, pinned."""
    entry = _ENTRY.c
    return _in_eviction_order(workspace, entry.key, func.length(entry.value), entry.pinned)


def eviction(workspace: str, keep: str, count: int) -> Any:
    """The DELETE of the first `count` entries of `workspace` that may go, in eviction order
    (never `keep` nor a pinned one), returning their keys: one statement whose parameters
    are the same few however many entries go (PostgreSQL's driver sends at most 65,535)."""
    entry, memory = _ENTRY.c, m.table_of(m.Memory)
    doomed = (
        _in_eviction_order(workspace, entry.id)
        .where(entry.key != keep, func.coalesce(entry.pinned, 0) != 1)
        .limit(count)
    )
    return delete(memory).where(memory.c.id.in_(doomed)).returning(memory.c.key)


def memory_entry(
    key: str, value: str, run_id: int, step: int, created_at: str, kind: Any, pinned: Any
) -> MemoryEntry:
    """An entry as upstream reads it: kind `decision` or else `fact`; pinned only when 1."""
    return MemoryEntry(
        key, value, run_id, step, created_at, DECISION if kind == DECISION else FACT, pinned == 1
    )


class MemoryMixin(OlderStoreMixin):
    """The memory half of upstream's Store."""

    @writes
    def memory_put(self, workspace: str, key: str, value: str, run_id: int, step: int) -> list[str]:
        """Write or replace `key` in `workspace` as a fact; return the keys evicted to hold the
        caps, in eviction order. A pinned entry is left as it is and nothing is evicted (the
        return is `[]`, as upstream's, which cannot tell that refusal from a plain write)."""
        return self.memory_write(workspace, key, value, run_id, step, FACT).evicted

    @writes
    def memory_write(
        self, workspace: str, key: str, value: str, run_id: int, step: int, kind: str = FACT
    ) -> MemoryWrite:
        """Write or replace `key` as `kind` (`fact` or `decision`) under the default caps,
        saying whether a pin refused it (0.30) — `memory_put` with the answer kept."""
        return self.memory_write_with(workspace, key, value, run_id, step, kind, MemoryLimits())

    @writes
    def memory_write_with(
        self,
        workspace: str,
        key: str,
        value: str,
        run_id: int,
        step: int,
        kind: str,
        limits: MemoryLimits,
    ) -> MemoryWrite:
        """`memory_write` under caps the caller chose (0.56): the value is cut to
        `limits.max_entry_chars` (marked), then the least-proven unpinned entries go until the
        workspace holds at most `max_entries` entries and `max_chars` characters."""
        check_limits(limits)
        params = {
            "workspace": check_text(workspace, "workspace"),
            "key": check_text(key, "key"),
            "value": truncate_value(check_text(value, "value"), limits.max_entry_chars),
            "run_id": run_id,
            "step": u32(step, "step"),
            "kind": check_kind(kind),
        }
        self._backend.check_memory_key(workspace, key)
        point = {k: params[k] for k in ("run_id", "workspace", "key", "step")}
        with self._write() as conn:
            self._backend.lock_memory_workspace(conn, workspace)
            recorded = conn.execute(_SNAPSHOT_TEXT, point).rowcount
            if not recorded:
                recorded = conn.execute(_SNAPSHOT_ABSENT, point).rowcount
            written = conn.execute(text(_UPSERT.format(now=self._backend.now())), params).rowcount
            if not written:
                if recorded:
                    del point["step"]
                    conn.execute(_DROP_SNAPSHOT, point)
                return MemoryWrite(refused=True)
            return MemoryWrite(evicted=self._enforce_caps(conn, workspace, key, limits))

    def _enforce_caps(
        self, conn: Any, workspace: str, keep: str, limits: MemoryLimits
    ) -> list[str]:
        """Evict the least-proven entries until both caps hold; never `keep` nor a pinned one,
        though pinned entries count (pinning everything cannot raise the ceiling)."""
        entries = conn.execute(eviction_candidates(workspace)).all()
        count = len(entries)
        chars = sum(max(int(n), 0) for _, n, _ in entries)
        evicted: list[str] = []
        for entry_key, length, pinned in entries:
            if count <= limits.max_entries and chars <= limits.max_chars:
                break
            if entry_key == keep or pinned == 1:
                continue
            evicted.append(entry_key)
            count -= 1
            chars -= max(int(length), 0)
        if not evicted:
            return []
        gone = set(conn.execute(eviction(workspace, keep, len(evicted))).scalars())
        # what the DELETE took, in the order read (the same rows, unless a recall recorded
        # meanwhile reordered them)
        return [entry_key for entry_key, _, _ in entries if entry_key in gone]

    @reads
    def memory_similar(self, workspace: str, key: str, value: str) -> MemoryEntry | None:
        """The entry of `workspace`, under another key, that `value` most restates (0.57): at
        least 60% of the two notes' words shared; most shared words wins, a tie goes to the
        entry `memory_list` returns first. Computed here, no model involved."""
        tokens = memory_tokens(value)
        if not tokens:
            return None
        best: tuple[int, MemoryEntry] | None = None
        for entry in self.memory_list(workspace):
            if entry.key == key:
                continue
            other = memory_tokens(entry.value)
            if not memory_is_similar(tokens, other):
                continue
            shared, _ = memory_overlap(tokens, other)
            if best is None or shared > best[0]:
                best = (shared, entry)
        return None if best is None else best[1]

    @writes
    def memory_pin(self, workspace: str, key: str, pinned: bool) -> bool:
        """Pin or unpin one entry (0.30): a pinned entry is neither overwritten by a run nor
        evicted. True when the entry exists."""
        mem = m.Memory
        with self._write() as conn:
            changed = conn.execute(
                update(mem)
                .where(mem.workspace == workspace, mem.key == key)
                .values(pinned=1 if pinned else 0)
            ).rowcount
        return bool(changed)

    @writes
    def record_memory_recall(self, run_id: int, step: int, workspace: str, keys: list[str]) -> None:
        """Record that a run drew on these keys at `step`: one row per key per recall, the
        evidence eviction ranks by (crate-internal upstream, where the context assembler
        writes it; public here so a Python harness can too)."""
        rows = [
            {
                "run_id": run_id,
                "step": u32(step, "step"),
                "workspace": check_text(workspace, "workspace"),
                "key": check_text(k, "key"),
            }
            for k in keys
        ]
        if rows:
            with self._write() as conn:
                conn.execute(insert(m.MemoryRecall), rows)

    @reads
    def memory_recalls(self, run_id: int) -> list[MemoryRecall]:
        """Which entries a run drew on, in recall order; a key once per recall (0.30)."""
        if self._lacks("memory_recalls"):
            return []
        r = m.MemoryRecall
        statement = (
            select(r.run_id, r.step, r.workspace, r.key, r.at)
            .where(r.run_id == run_id)
            .order_by(r.id)
        )
        return self._rows(statement, MemoryRecall)

    @reads
    def memory_snapshots(self, run_id: int) -> list[MemorySnapshot]:
        """What every entry this run changed looked like before its first change (0.36), in
        order: the restore points a rewind puts back. An unknown state reads as a value."""
        if self._lacks("memory_snapshots"):
            return []
        s = m.MemorySnapshot
        statement = (
            select(s.workspace, s.key, s.before, s.kind, s.step, s.state)
            .where(s.run_id == run_id)
            .order_by(s.id)
        )
        return self._rows(
            statement,
            lambda ws, key, before, kind, step, state: MemorySnapshot(
                ws, key, before, kind, int(step), state == "absent"
            ),
        )

    def _entries(self, workspace: str, key: str | None = None) -> list[MemoryEntry]:
        mem = m.Memory
        # Before 0.30 every entry is an unpinned fact.
        kinds = (
            (mem.kind, mem.pinned)
            if self._has_columns("memory", "kind", "pinned")
            else (
                null(),
                null(),
            )
        )
        statement = select(mem.key, mem.value, mem.run_id, mem.step, mem.created_at, *kinds).where(
            mem.workspace == workspace
        )
        if key is not None:
            statement = statement.where(mem.key == key)
        return self._rows(statement.order_by(mem.created_at, mem.key), memory_entry)

    @reads
    def memory_list(self, workspace: str) -> list[MemoryEntry]:
        """Every entry of `workspace`, oldest first, a same-stamp tie broken by key (0.57);
        never another workspace's."""
        return self._entries(workspace)

    @reads
    def memory_get(self, workspace: str, key: str) -> MemoryEntry | None:
        """One entry of `workspace` by key, if it holds one."""
        has_kinds = self._has_columns("memory", "kind", "pinned")
        rows = self._point("memory_get", point_entry, has_kinds, workspace=workspace, key=key)
        return memory_entry(*rows[0]) if rows else None

    @writes
    def memory_forget(self, workspace: str, key: str, run_id: int, step: int) -> MemoryForget:
        """Remove one entry on a run's behalf (0.56): refused for a pinned entry; otherwise
        the run's restore point is taken first (a rewind puts the entry back) and the entry's
        recalls go with it."""
        mem, recall = m.Memory, m.MemoryRecall
        point = {
            "run_id": run_id,
            "workspace": check_text(workspace, "workspace"),
            "key": check_text(key, "key"),
            "step": u32(step, "step"),
        }
        with self._write() as conn:
            self._backend.lock_memory_workspace(conn, workspace)
            row = conn.execute(
                select(mem.value, mem.kind, mem.pinned).where(
                    mem.workspace == workspace, mem.key == key
                )
            ).first()
            if row is None:
                return MemoryForget.ABSENT
            if row.pinned == 1:
                return MemoryForget.PINNED
            kind = DECISION if row.kind == DECISION else FACT
            conn.execute(_FORGET_POINT, {**point, "before": row.value, "kind": kind})
            conn.execute(delete(mem).where(mem.workspace == workspace, mem.key == key))
            conn.execute(delete(recall).where(recall.workspace == workspace, recall.key == key))
        return MemoryForget.REMOVED

    @writes
    def memory_delete(self, workspace: str, key: str) -> bool:
        """Forget one entry; True when an entry was removed. Its recalls and restore points
        stay, as upstream's."""
        mem = m.Memory
        with self._write() as conn:
            result = conn.execute(delete(mem).where(mem.workspace == workspace, mem.key == key))
        return bool(result.rowcount)

    @writes
    def memory_clear(self, workspace: str) -> int:
        """Remove every entry of `workspace`; return how many. Other workspaces keep theirs."""
        mem = m.Memory
        with self._write() as conn:
            result = conn.execute(delete(mem).where(mem.workspace == workspace))
        return int(result.rowcount)
