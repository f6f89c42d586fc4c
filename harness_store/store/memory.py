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

from sqlalchemy import delete, distinct, func, null, select, text

from .. import models as m
from ..formats import MEMORY_MAX_CHARS, MEMORY_MAX_ENTRIES, i64, truncate_memory_value, u32
from ..formats import text as check_text
from ..records import MemoryEntry
from .base import StoreBase

FACT = "fact"
DECISION = "decision"

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


def eviction_candidates(workspace: str) -> Any:
    """A workspace's entries in upstream's eviction order (0.56): key, length, pinned."""
    # A Core alias, not `orm.aliased`: that would configure every mapper on the first put.
    mem, recall = m.Memory, m.table_of(m.MemoryRecall).alias("recall")
    of_entry = (recall.c.workspace == mem.workspace, recall.c.key == mem.key)
    runs = select(func.count(distinct(recall.c.run_id))).where(*of_entry).scalar_subquery()
    last_recall = select(func.max(recall.c.at)).where(*of_entry).scalar_subquery()
    return (
        select(mem.key, func.length(mem.value), mem.pinned)
        .where(mem.workspace == workspace)
        .order_by(runs, last_recall.asc().nulls_first(), mem.created_at, mem.id)
    )


def memory_entry(
    key: str, value: str, run_id: int, step: int, created_at: str, kind: Any, pinned: Any
) -> MemoryEntry:
    """An entry as upstream reads it: kind `decision` or else `fact`; pinned only when 1."""
    return MemoryEntry(
        key, value, run_id, step, created_at, DECISION if kind == DECISION else FACT, pinned == 1
    )


class MemoryMixin(StoreBase):
    """The memory half of upstream's Store."""

    def memory_put(self, workspace: str, key: str, value: str, run_id: int, step: int) -> list[str]:
        """Write or replace `key` in `workspace` as a fact; return the keys evicted to hold the
        caps, in eviction order. A pinned entry is left as it is and nothing is evicted (the
        return is `[]`, as upstream's, which cannot tell that refusal from a plain write)."""
        params = {
            "workspace": check_text(workspace, "workspace"),
            "key": check_text(key, "key"),
            "value": truncate_memory_value(check_text(value, "value")),
            "run_id": i64(run_id, "run_id"),
            "step": u32(step, "step"),
            "kind": FACT,
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
                return []
            return self._enforce_caps(conn, workspace, key)

    def _enforce_caps(self, conn: Any, workspace: str, keep: str) -> list[str]:
        """Evict the least-proven entries until both caps hold; never `keep` nor a pinned one,
        though pinned entries count (pinning everything cannot raise the ceiling)."""
        entries = conn.execute(eviction_candidates(workspace)).all()
        count = len(entries)
        chars = sum(max(int(n), 0) for _, n, _ in entries)
        evicted: list[str] = []
        for entry_key, length, pinned in entries:
            if count <= MEMORY_MAX_ENTRIES and chars <= MEMORY_MAX_CHARS:
                break
            if entry_key == keep or pinned == 1:
                continue
            evicted.append(entry_key)
            count -= 1
            chars -= max(int(length), 0)
        if evicted:
            mem = m.Memory
            conn.execute(delete(mem).where(mem.workspace == workspace, mem.key.in_(evicted)))
        return evicted

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

    def memory_list(self, workspace: str) -> list[MemoryEntry]:
        """Every entry of `workspace`, oldest first, a same-stamp tie broken by key (0.57);
        never another workspace's."""
        return self._entries(workspace)

    def memory_get(self, workspace: str, key: str) -> MemoryEntry | None:
        """One entry of `workspace` by key, if it holds one."""
        found = self._entries(workspace, key)
        return found[0] if found else None

    def memory_delete(self, workspace: str, key: str) -> bool:
        """Forget one entry; True when an entry was removed. Its recalls and restore points
        stay, as upstream's."""
        mem = m.Memory
        with self._write() as conn:
            result = conn.execute(delete(mem).where(mem.workspace == workspace, mem.key == key))
        return bool(result.rowcount)

    def memory_clear(self, workspace: str) -> int:
        """Remove every entry of `workspace`; return how many. Other workspaces keep theirs."""
        mem = m.Memory
        with self._write() as conn:
            result = conn.execute(delete(mem).where(mem.workspace == workspace))
        return int(result.rowcount)
