"""Where a Store writes the spend answers it priced, to be kept (see `spend`)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from sqlalchemy import Connection

from ..dialects import Backend
from ..errors import StoreAccessError, StoreLockedError
from ..models.spend import PRICED_DAYS, USAGE_SUMS

BIG = 2**63 - 1
"""The largest value a kept answer's BIGINT column holds (a group past it is not kept)."""

Group = tuple[Any, ...]
"""A kept answer's key: (day, model), or (run id,)."""

Values = Sequence[int]
"""calls, the seven usage sums, cost, priced calls (the order `priced_rows` yields)."""


class KeepsThrough(Protocol):
    """A Store, as far as keeping answers needs it: its write unit and its backend."""

    @property
    def backend(self) -> Backend: ...

    def _write(self) -> AbstractContextManager[Connection]: ...


class SpendKeeper:
    """Where a Store writes the spend answers it priced, to be kept: through itself, or, for
    a read-only twin answering for a writable Store (an `AsyncStore`'s reader on SQLite),
    through that Store, so they are kept all the same. Writing is best effort: a store that
    turns out not to be writable is not tried again."""

    def __init__(self, through: KeepsThrough | None = None, *, read_only: bool = False) -> None:
        self._through = through
        self._unkept = read_only and through is None
        """Whether kept answers cannot be written (a read-only store)."""

    def keep(
        self,
        store: KeepsThrough,
        fp: str,
        keep: list[tuple[Any, Group, int, Values]],
    ) -> None:
        if self._unkept:
            return
        rows: dict[Any, list[dict[str, Any]]] = {}
        for table, group, changes, values in keep:
            if any(v > BIG for v in values):
                continue
            calls, *usage, cost, priced = values
            key = (
                dict(zip(["day", "model"], group, strict=True))
                if table is PRICED_DAYS
                else {"run_id": group[0]}
            )
            rows.setdefault(table, []).append(
                {"prices": fp, **key, "changes": changes, "calls": calls,
                 **dict(zip(USAGE_SUMS, usage, strict=True)), "cost_micros": cost,
                 "unpriced_calls": calls - priced}
            )  # fmt: skip
        target = self._through or store
        try:
            with target._write() as conn:
                for table, batch in rows.items():
                    conn.execute(target.backend.replace(table), batch)
        except StoreAccessError:
            self._unkept = True  # read-only: price again each time, say nothing
        except StoreLockedError:
            pass  # a writer holds the store: kept next time
