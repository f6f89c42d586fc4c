"""OpenTelemetry traces of a store's runs, over OTLP/HTTP with protobuf, for Arize Phoenix,
Jaeger, Langfuse, MLflow or any OTLP receiver (`pip install 'harness_store[otel]'`).

`export` sends the store's runs (or some trees, or those since a stamp) once; `follow` ships
runs as they finish. The mapping (`mapping`) follows the GenAI semantic conventions
`SEMCONV_VERSION` plus OpenInference's span kinds; ids are derived from the rows (each tree's
root run), so a second export sends the same spans.
"""

from __future__ import annotations

from .endpoint import traces_url
from .exporter import export, since_stamp
from .follow import follow
from .ids import SpanIds
from .mapping import SEMCONV_VERSION
from .sender import ExportReport

__all__ = [
    "SEMCONV_VERSION",
    "ExportReport",
    "SpanIds",
    "export",
    "follow",
    "since_stamp",
    "traces_url",
]
