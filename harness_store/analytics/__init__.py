"""Runs as typed columnar tables for analysis: the conversion behind `Store.arrow`,
`Store.iter_arrow` and `Store.frame`, the ready-made tables, and the Parquet export
(`harness-store export parquet`). Needs the `analytics` extra (pyarrow; pandas or polars
for `Store.frame`).
"""

from __future__ import annotations

from .schema import ORIGIN, TABLES, Kind, shape_of
from .tables import (
    policy_decisions,
    priced_calls,
    spend_by_model_and_day,
    step_table,
    tool_failures,
    tree_runs,
)

__all__ = [
    "ORIGIN",
    "TABLES",
    "Kind",
    "policy_decisions",
    "priced_calls",
    "shape_of",
    "spend_by_model_and_day",
    "step_table",
    "tool_failures",
    "tree_runs",
]
