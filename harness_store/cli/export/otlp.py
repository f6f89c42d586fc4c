"""`harness-store export otlp`: a store's runs as OpenTelemetry traces over OTLP/HTTP."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ...errors import InvalidValueError
from ..app import EPILOG, EXIT_USAGE, CliError, DbArg, SchemaOpt, missing_extra
from ..output import stdout_console
from ..reader import in_schema, open_reader
from ..stop_signals import stopped_by_signals
from . import export_app

if TYPE_CHECKING:
    from ...otel import ExportReport

MAX_WAIT_DEFAULT = 300.0
"""`--max-wait`'s default, `harness_store.otel.transport.MAX_WAIT` (spelled here for the same
reason as `MAX_REQUEST_BYTES_DEFAULT`; a test holds the two equal)."""

MAX_REQUEST_BYTES_DEFAULT = 4 * 1024 * 1024
"""`--max-request-bytes`'s default, `harness_store.otel.sender.MAX_REQUEST_BYTES` (spelled
here so that `--help` does not import the OpenTelemetry SDK; a test holds the two equal)."""

EXPORTER_LOGGER = "opentelemetry.exporter.otlp.proto.http"
"""The SDK exporter logs each failed batch itself; the command reports the failure once."""


@contextmanager
def exporter_quiet() -> Iterator[None]:
    """The OTLP exporter's own log lines silenced while the command runs (the command says
    what was delivered itself), and its level as it was after: a program calling `main`
    keeps its logging."""
    logger = logging.getLogger(EXPORTER_LOGGER)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def parse_headers(values: list[str]) -> dict[str, str]:
    """`KEY=VALUE` options as a mapping; a malformed one is a usage error that does not repeat
    its value (headers hold API keys)."""
    headers: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key.strip():
            raise CliError(EXIT_USAGE, "--header takes KEY=VALUE (the value is not shown here)")
        headers[key.strip()] = rest
    return headers


def summary(report: ExportReport) -> str:
    """One line: what was sent where."""
    return (
        f"sent {report.spans:,} spans of {report.runs:,} runs ({report.chat_spans:,} chat, "
        f"{report.tool_spans:,} tool) to {report.endpoint}"
    )


@export_app.command("otlp", epilog=EPILOG)
def otlp_command(
    db: DbArg,
    endpoint: Annotated[
        str,
        typer.Option(
            "--endpoint",
            metavar="URL",
            help="The OTLP/HTTP receiver: a base URL (http://127.0.0.1:6006 for Phoenix, "
            "http://127.0.0.1:4318 for a collector or Jaeger) or its full /v1/traces URL.",
        ),
    ],
    run: Annotated[
        list[int] | None,
        typer.Option("--run", metavar="ID", help="Only the tree under this run (repeatable)."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="STAMP",
            help="Only runs started or finished at or after STAMP (2026-08-01 or "
            "2026-08-01T14:00:00Z, UTC).",
        ),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            help="Then ship each run as it finishes, until SIGTERM or Ctrl-C.",
        ),
    ] = False,
    header: Annotated[
        list[str] | None,
        typer.Option("--header", metavar="KEY=VALUE", help="An HTTP header to send (repeatable)."),
    ] = None,
    include_content: Annotated[
        bool,
        typer.Option(
            "--include-content",
            help="Also send prompts, results and tool arguments (they can hold secrets).",
        ),
    ] = False,
    prices: Annotated[
        Path | None,
        typer.Option("--prices", metavar="FILE", help="Price table JSON for harness.cost.*."),
    ] = None,
    project: Annotated[
        str,
        typer.Option(
            "--project", metavar="NAME", help="The project name Phoenix files the traces under."
        ),
    ] = "io-harness",
    identity: Annotated[
        str | None,
        typer.Option(
            "--identity",
            metavar="NAME",
            help="Mixed into every trace and span id: another NAME gives the same runs other "
            "ids, so a second destination (another MLflow experiment) gets traces of its own.",
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            help="The most each request may take: connect, send and answer (a wall-clock limit).",
        ),
    ] = 10.0,
    max_wait: Annotated[
        float,
        typer.Option(
            "--max-wait",
            metavar="SECONDS",
            help="How long a batch the receiver pushes back (429, 502, 503, 504: it is busy) "
            "is sent again, after the pause its Retry-After asks for or a growing one "
            "(default 300; 0: not at all; inf: as long as it answers).",
        ),
    ] = MAX_WAIT_DEFAULT,
    max_request_bytes: Annotated[
        int,
        typer.Option(
            "--max-request-bytes",
            metavar="BYTES",
            help="The largest request to send (default 4 MiB, which the OpenTelemetry "
            "Collector, Phoenix and MLflow take); a long run goes out over several.",
        ),
    ] = MAX_REQUEST_BYTES_DEFAULT,
    schema: SchemaOpt = None,
) -> None:
    """Send the store's runs to an OTLP/HTTP receiver (Phoenix, Jaeger, Langfuse, MLflow) as
    traces: one trace per tree of runs, an invoke_agent span per run, a chat span per provider
    call, an execute_tool span per tool call. Exporting again sends the same span ids.
    Read-only: the store is never changed."""
    db = in_schema(db, schema)
    try:
        from ...otel import export, since_stamp, traces_url
        from ...otel import follow as follow_runs
        from ...otel.sender import request_limit
    except ImportError as exc:
        raise missing_extra(exc, "export otlp", "otel") from None
    from ..spend import load_prices

    if not timeout > 0:
        raise CliError(EXIT_USAGE, "--timeout takes a number of seconds above 0")
    if not max_wait >= 0:
        raise CliError(EXIT_USAGE, "--max-wait takes a number of seconds, 0 or more")
    headers = parse_headers(header or [])
    table = load_prices(prices) if prices is not None else None
    try:
        traces_url(endpoint)
        stamp = since_stamp(since) if since is not None else None
    except InvalidValueError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    try:
        request_limit(max_request_bytes)
    except InvalidValueError as exc:
        raise CliError(EXIT_USAGE, f"--max-request-bytes: {exc}") from None
    with exporter_quiet():
        console = stdout_console()
        if not follow:
            with open_reader(db, replace=False) as reader:
                report = export(
                    reader.store, endpoint=endpoint, runs=run, since=stamp, headers=headers,
                    include_content=include_content, prices=table, project=project,
                    timeout=timeout, identity=identity, max_request_bytes=max_request_bytes,
                    max_wait=max_wait,
                )  # fmt: skip
            console.print(summary(report), highlight=False, soft_wrap=True)
            return

        # A live store: the read-only Store sees other processes' writes, also those of a
        # writer that opens a still file after it (`dialects.read_only_files`). Ctrl-C, SIGTERM and
        # SIGHUP stop it after the run in flight, with a last line counting what the follow
        # sent (exit 0).
        def shipped(done: ExportReport) -> None:
            console.print(summary(done), highlight=False, soft_wrap=True)

        stop = threading.Event()
        with stopped_by_signals(stop), open_reader(db, replace=False) as reader:
            report = export(
                reader.store, endpoint=endpoint, runs=run, since=stamp, headers=headers,
                include_content=include_content, prices=table, project=project,
                timeout=timeout, identity=identity, finished_only=True, stop=stop,
                max_request_bytes=max_request_bytes, max_wait=max_wait,
            )  # fmt: skip
            console.print(summary(report), highlight=False, soft_wrap=True)
            if stop.is_set():
                return
            followed = follow_runs(
                reader.store, endpoint=endpoint, after=report.last_run_id,
                running=report.running, runs=run, since=stamp, headers=headers,
                include_content=include_content, prices=table, project=project,
                timeout=timeout, identity=identity, stop=stop, on_send=shipped,
                max_request_bytes=max_request_bytes, max_wait=max_wait,
            )  # fmt: skip
        shipped(followed)
