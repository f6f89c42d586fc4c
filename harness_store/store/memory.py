"""Durable cross-run memory: per-workspace entries under upstream's caps.

A workspace holds at most `MEMORY_MAX_ENTRIES` entries and `MEMORY_MAX_CHARS` characters; a
value longer than `MEMORY_MAX_ENTRY_CHARS` is cut and marked, never refused. A write that breaks
a cap evicts the oldest entries (by `created_at`, then `id`) but never the one just written.
Upstream runs the write and the evictions as separate statements; here they are one
transaction, so a crash can never leave a workspace over its caps.
"""

from __future__ import annotations

from sqlalchemy import delete, func, select, text

from .. import models as m
from ..formats import MEMORY_MAX_CHARS, MEMORY_MAX_ENTRIES, i64, truncate_memory_value, u32
from ..formats import text as check_text
from ..records import MemoryEntry
from .base import StoreBase


class MemoryMixin(StoreBase):
    """The memory half of upstream's Store."""

    def memory_put(self, workspace: str, key: str, value: str, run_id: int, step: int) -> list[str]:
        """Write or replace `key` in `workspace`; return the keys evicted to hold the caps,
        oldest first."""
        row = {
            "workspace": check_text(workspace, "workspace"),
            "key": check_text(key, "key"),
            "value": truncate_memory_value(check_text(value, "value")),
            "run_id": i64(run_id, "run_id"),
            "step": u32(step, "step"),
            "created_at": text(self._backend.now()),
        }
        self._backend.check_memory_key(workspace, key)
        table = m.table_of(m.Memory)
        mem = m.Memory
        with self._write() as conn:
            self._backend.lock_memory_workspace(conn, workspace)
            conn.execute(self._backend.upsert_memory(table).values(**row))
            entries = conn.execute(
                select(mem.key, func.length(mem.value))
                .where(mem.workspace == workspace)
                .order_by(mem.created_at, mem.id)
            ).all()
            count = len(entries)
            chars = sum(int(n) for _, n in entries)
            evicted: list[str] = []
            for entry_key, length in entries:
                if count <= MEMORY_MAX_ENTRIES and chars <= MEMORY_MAX_CHARS:
                    break
                if entry_key == key:
                    continue
                evicted.append(entry_key)
                count -= 1
                chars -= int(length)
            if evicted:
                conn.execute(delete(mem).where(mem.workspace == workspace, mem.key.in_(evicted)))
        return evicted

    def _entries(self, workspace: str, key: str | None = None) -> list[MemoryEntry]:
        mem = m.Memory
        statement = select(mem.key, mem.value, mem.run_id, mem.step, mem.created_at).where(
            mem.workspace == workspace
        )
        if key is not None:
            statement = statement.where(mem.key == key)
        return self._rows(statement.order_by(mem.created_at, mem.id), MemoryEntry)

    def memory_list(self, workspace: str) -> list[MemoryEntry]:
        """Every entry of `workspace`, oldest first; never another workspace's."""
        return self._entries(workspace)

    def memory_get(self, workspace: str, key: str) -> MemoryEntry | None:
        """One entry of `workspace` by key, if it holds one."""
        found = self._entries(workspace, key)
        return found[0] if found else None

    def memory_delete(self, workspace: str, key: str) -> bool:
        """Forget one entry; True when an entry was removed."""
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
