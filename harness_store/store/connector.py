"""The old place of `harness_store.connector` (kept while `aio` imports it from here)."""

from __future__ import annotations

from ..connector import BlockState, Connector, SQLiteConnector, Work, connector_for

__all__ = ["BlockState", "Connector", "SQLiteConnector", "Work", "connector_for"]
