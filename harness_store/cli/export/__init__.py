"""`harness-store export`: a store's runs in the formats other tools read.

One sub-command a format, each in its own module beside this one (`otlp`: OpenTelemetry
traces over OTLP/HTTP; `parquet`: a Parquet dataset). Each module registers its command on
`export_app` when imported below.
"""

from __future__ import annotations

import typer

from ..app import EPILOG, app

export_app = typer.Typer(
    name="export",
    help="Export a store's runs to the tools people already use (trace viewers, DataFrames).",
    epilog=EPILOG,
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(export_app)

from . import otlp, parquet  # noqa: E402, F401  (each registers its command on export_app)
