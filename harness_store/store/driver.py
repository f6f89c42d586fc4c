"""The old place of `harness_store.connector.driver` (kept while the Store and `aio` import it
from here)."""

from __future__ import annotations

from ..connector.driver import LATE_ROUNDS, DriverStatement, execute_call, execute_together

__all__ = ["LATE_ROUNDS", "DriverStatement", "execute_call", "execute_together"]
