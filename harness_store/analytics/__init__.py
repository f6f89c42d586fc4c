"""Runs as typed columnar tables for analysis: the conversion behind `Store.arrow`,
`Store.iter_arrow` and `Store.frame`, the ready-made tables, and the Parquet export
(`harness-store export parquet`). Needs the `analytics` extra (pyarrow; pandas or polars
for `Store.frame`).
"""

from __future__ import annotations

from ..arrow.schema import ORIGIN, TABLES, Kind, shape_of
from .dataset import ExportReport, TableExport, dataset_files, export_parquet, read_dataset
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
    "ExportReport",
    "Kind",
    "TableExport",
    "dataset_files",
    "export_parquet",
    "policy_decisions",
    "priced_calls",
    "read_dataset",
    "shape_of",
    "spend_by_model_and_day",
    "step_table",
    "tool_failures",
    "tree_runs",
]
