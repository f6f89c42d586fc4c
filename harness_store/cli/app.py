"""The typer app, its shared arguments and exit codes, and the entry point that turns every
error into one line on stderr."""

from __future__ import annotations

import atexit
import gc
import logging
import os
import sys
from collections.abc import Sequence
from typing import Annotated, Any, TextIO

import typer
from typer.core import TyperArgument

from ..errors import (
    MissingDriverError,
    RunNotFoundError,
    SchemaError,
    StoreError,
    StoreLockedError,
    StoreNotFoundError,
    UnansweredError,
    install_hint,
)
from .output import escape_unshowable, visible

DEBUG_ENV = "HARNESS_STORE_DEBUG"
"""Environment variable that lets an unexpected error's traceback through."""

EXIT_OTHER, EXIT_USAGE, EXIT_NOT_A_STORE, EXIT_LOCKED, EXIT_NOT_FOUND = 1, 2, 3, 4, 5

EXIT_INTERRUPTED = 130
"""Ctrl-C where a command does not handle it itself (Typer's exit for KeyboardInterrupt)."""

MAX_INT = 2**63 - 1
"""The largest id, step or count a store can hold; larger arguments are usage errors."""

PACKAGE_DOC = sys.modules[__package__].__doc__ or "" if __package__ else ""
"""The package docstring: the summary and the exit-code table that --help shows."""

EXIT_CODES = (
    "\b\nExit codes (an error is one line on stderr):\n"
    + PACKAGE_DOC.partition("an exit code:\n\n")[2].rstrip()
)
"""The exit-code table of the package docstring, kept as it is laid out (`\\b`) in the
top-level --help (once: not repeated in every command's)."""

EPILOG = ""
"""A command's --help epilog: none (the exit codes are in `harness-store --help`)."""


OWN_PROCESS = False
"""Whether `main` runs as the process's own command (the `harness-store` script, `python -m
harness_store.cli`), not called from Python with arguments: only then does it tune the
process's garbage collector (see `main`)."""


class CliError(Exception):
    """A failure the command reports as one line with a chosen exit code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


app = typer.Typer(
    name="harness-store",
    help=PACKAGE_DOC.split("\n\n", 1)[0]
    + "\n\nRead commands open the store read-only and never change it; a store older than "
    "0.13 (or torn) must first be brought up with `harness-store upgrade` (exit code 3).",
    epilog=EXIT_CODES,
    add_completion=True,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _usage_name(self: TyperArgument) -> str:
    """`DB` in usage lines, `[DB]` when optional: no braces around a required argument."""
    name = self.display_name_raw
    return name if self.required else f"[{name}]"


def _no_type(self: TyperArgument, ctx: object) -> None:
    """No `<str>`/`<int>` after an argument's name in --help: its help says what it is."""
    return None


TyperArgument._usage_display_name = _usage_name  # type: ignore[method-assign]
TyperArgument.display_type_rich = _no_type  # type: ignore[method-assign, assignment]


def show_version(value: bool) -> None:
    """`--version`: the package's version and the newest schema it writes."""
    if value:
        from importlib import metadata

        from ..releases import HEAD, UPSTREAM_HEAD

        try:
            version = metadata.version("harness_store")
        except metadata.PackageNotFoundError:
            version = "unknown (not installed)"
        sys.stdout.write(
            f"harness-store {version} (schema revision {HEAD}, io-harness {UPSTREAM_HEAD})\n"
        )
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=show_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Look into, upgrade and copy io-harness run stores."""


DbArg = Annotated[str, typer.Argument(metavar="DB", help="Store file path or SQLAlchemy URL.")]
RunArg = Annotated[int, typer.Argument(metavar="RUN", help="Run id.", max=MAX_INT)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
SchemaOpt = Annotated[
    str | None,
    typer.Option(
        "--schema",
        metavar="NAME",
        help="PostgreSQL: the schema of its own the store lives in, beside an application's "
        "tables (the same as ?options=-csearch_path%3DNAME in the URL).",
    ),
]


# --- errors and entry point --------------------------------------------------------------


def one_line(message: str) -> str:
    """A message as a single line (driver errors span several)."""
    first = next((line for line in message.splitlines() if line.strip()), message)
    return " ".join(first.split())


def classify(exc: BaseException, argv: Sequence[str] = ()) -> tuple[int, str]:
    """The exit code and one-line message for an error (see the module docstring); `argv`,
    the command's arguments, names the server a failed connection was meant for. A database
    error is said as the one translation (`connector.translation`) types it."""
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    from ..connector.translation import plain_message, translated
    from ..engine import DRIVER_EXTRAS

    if isinstance(exc, CliError):
        return exc.code, str(exc)
    for each in (exc, *causes(exc)):
        typed = each if isinstance(each, StoreError) else translated(None, each)
        if isinstance(typed, UnansweredError):
            unreached = unreachable_server(argv)
            if unreached is not None:
                return EXIT_OTHER, unreached
            break
    if not isinstance(exc, StoreError):
        typed = translated(None, exc)
        if typed is not None:
            return classify(typed, argv)  # "not a database" too, by its result code
    if isinstance(exc, StoreLockedError):
        return EXIT_LOCKED, str(exc)
    if isinstance(exc, SchemaError | StoreNotFoundError):
        return EXIT_NOT_A_STORE, str(exc)
    if isinstance(exc, RunNotFoundError):
        return EXIT_NOT_FOUND, str(exc)
    if isinstance(exc, StoreError):
        return EXIT_OTHER, str(exc)
    if isinstance(exc, ArgumentError | NoSuchModuleError):
        return EXIT_USAGE, str(exc)
    if type(exc).__name__ == "CommandError" and type(exc).__module__.startswith("alembic"):
        return EXIT_USAGE, f"alembic: {exc}"
    said = plain_message(exc)
    if said is not None:
        return EXIT_OTHER, said
    if isinstance(exc, ModuleNotFoundError) and exc.name in DRIVER_EXTRAS:
        return EXIT_OTHER, str(MissingDriverError(exc.name, DRIVER_EXTRAS[exc.name]))
    if isinstance(exc, OSError):
        return EXIT_OTHER, f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    return EXIT_OTHER, f"unexpected {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 for details)"


def missing_extra(exc: ImportError, needs: str, extra: str) -> CliError:
    """The error for a command whose optional dependency is not installed: `needs` says what
    needs it ("exporting Parquet"); exit 1, as for any other failure that is not usage."""
    module = (exc.name or "a module").split(".")[0]
    return CliError(EXIT_OTHER, f"{needs} needs {module}, which is not installed: "
                    + install_hint(extra))  # fmt: skip


def server_of(argv: Sequence[str]) -> tuple[str, int, str] | None:
    """(host, port, database) of the first PostgreSQL URL among the arguments."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    for arg in argv:
        if arg.startswith("postgresql"):
            try:
                url = make_url(arg)
            except ArgumentError:
                continue
            return url.host or "localhost", url.port or 5432, url.database or ""
    return None


def unreachable_server(argv: Sequence[str]) -> str | None:
    """A PostgreSQL connection that failed unanswered (`UnansweredError`) to the server
    `argv` names, said as what it is — no such database, an unknown host, a refused
    connection — or None when it is none of these (the password is never part of it)."""
    import socket

    found = server_of(argv)
    if found is None:
        return None
    host, port, _ = found
    try:
        socket.getaddrinfo(host, port)
    except socket.gaierror:
        return f"unknown host {host!r}: it does not resolve to an address"
    try:
        socket.create_connection((host, port), timeout=5).close()
    except ConnectionRefusedError:
        return f"the server at {host}:{port} refused the connection (is PostgreSQL running there?)"
    except OSError as err:
        return f"cannot reach {host}:{port}: {err.strerror or err}"
    if missing_database(argv):
        return f"the database {found[2]!r} does not exist on {host}:{port}; create it first"
    return None


def missing_database(argv: Sequence[str]) -> bool:
    """Whether the server of the first PostgreSQL URL answers on its `postgres` database that
    the URL's database is not among its databases (psycopg gives a failed connection no
    SQLSTATE, so the server is asked)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    from ..connector import connector_at
    from ..dialects import backend_named

    for arg in argv:
        if not arg.startswith("postgresql"):
            continue
        url = make_url(arg)
        server = url.set(database="postgres").update_query_dict({"connect_timeout": "5"})
        try:
            with connector_at(server) as connector, connector.read() as conn:
                return not backend_named("postgresql").database_exists(conn, str(url.database))
        except (SQLAlchemyError, StoreError):
            return False
    return False


def causes(exc: BaseException) -> list[BaseException]:
    """The errors `exc` was raised from (its cause, theirs, …), nearest first."""
    found: list[BaseException] = []
    current = exc.__cause__ or exc.__context__
    while current is not None and current not in found and len(found) < 8:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def secrets_in(argv: Sequence[str]) -> list[str]:
    """The passwords of URL arguments, and each `@`-separated piece of one, as typed."""
    found = []
    for arg in argv:
        _, sep, rest = arg.partition("://")
        userinfo = rest.split("/", 1)[0].rpartition("@")[0] if sep else ""
        password = userinfo.partition(":")[2]
        if password:
            found.append(password)
            found.extend(piece for piece in password.split("@") if len(piece) >= 3)
    return sorted(set(found), key=len, reverse=True)


def scrubbed(message: str, argv: Sequence[str]) -> str:
    """`message` with any password given among the command's arguments `argv` cut out (a last
    guard: a driver may quote the URL it was given)."""
    for secret in secrets_in(argv):
        message = message.replace(secret, "(password hidden)")
    return message


class OutputClosed(Exception):
    """The reader of the command's output closed it (`… | head`): nothing more to say."""


class PipeGuard:
    """stdout, with a write into a closed pipe raised as `OutputClosed` (not an `OSError`,
    which click would turn into a silent exit 1)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise OutputClosed from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise OutputClosed from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def close_quietly(stream: TextIO) -> None:
    """Point the closed stdout at /dev/null, so the interpreter's last flush at exit cannot
    fail on it again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass  # not a real file (a test's buffer): nothing will flush into a pipe


LIBRARY_LOGS = logging.NullHandler()
"""Where SQLAlchemy's log records go in the command: nowhere. Its pool logs, with a traceback,
what it catches and raises again (Ctrl-C landing while it resets a connection); without a
handler Python prints such records on stderr, but the command reports every error itself, in
one line (`HARNESS_STORE_DEBUG` lets them through)."""


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command; turn every error into one line on stderr and its exit code. Output
    into a pipe its reader closed ends the command quietly, exit 0, as `… | head` expects;
    Ctrl-C, where the command does not handle it itself, ends it with exit 130 and nothing on
    stderr. `argv`: the arguments (default: the process's); errors are explained from them.

    Run as the process's own command (no `argv`, `OWN_PROCESS`), it keeps the objects its
    imports made (SQLAlchemy, the models and their mappers, Typer) out of the garbage
    collector's walks: frozen (`gc.freeze`) once the read commands have imported the Store
    (`reader.open_reader`), and at exit, where the interpreter's last collections would
    otherwise walk them all, a third of a short command's CPU, to free nothing a process
    ending needs freed. Called from Python with `argv`, it leaves the caller's collector
    alone, and so does `export parquet` the caller's imports (pyarrow may load pandas)."""
    global OWN_PROCESS
    if argv is None:
        OWN_PROCESS = True
        atexit.register(gc.freeze)
    library = logging.getLogger("sqlalchemy")
    if not os.environ.get(DEBUG_ENV) and LIBRARY_LOGS not in library.handlers:
        library.addHandler(LIBRARY_LOGS)
    args = list(argv) if argv is not None else sys.argv[1:]
    escape_unshowable(sys.stdout, sys.stderr)
    stdout = sys.stdout
    sys.stdout = PipeGuard(stdout)
    try:
        app(args=args, prog_name="harness-store")
    except OutputClosed:
        close_quietly(stdout)
        sys.exit(0)
    except Exception as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        code, message = classify(exc, args)
        sys.stderr.write(f"harness-store: error: {visible(scrubbed(one_line(message), args))}\n")
        sys.exit(code)
    finally:
        sys.stdout = stdout
