"""A PostgreSQL URL that cannot be used is said as what it is — the driver not installed, a
server refusing the connection, a host that does not resolve, a database that does not
exist — with the URL's password never shown."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from sqlalchemy.engine import make_url
from support.clirun import environ, run_in_process

SECRET = "s3cret-pw"


def harness_store(*args: str, block: str | None = None) -> subprocess.CompletedProcess[str]:
    """The command, as `main(args)` is called: in this process, or with `block` (a module made
    unimportable) in a child process."""
    if block is None:
        return run_in_process(*args)
    prelude = "import sys; " + (f"sys.modules[{block!r}] = None; " if block else "")
    code = prelude + "from harness_store.cli import main; main(sys.argv[1:])"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=environ(),
        timeout=120,
        check=False,
    )


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 1, done
    assert SECRET not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr, done.stderr


@pytest.mark.parametrize("command", ["upgrade", "runs"])
def test_psycopg_missing_names_the_extra(command: str) -> None:
    url = f"postgresql+psycopg://u:{SECRET}@127.0.0.1:5432/x"
    check(harness_store(command, url, block="psycopg"), 'pip install ".[postgresql]"')


@pytest.mark.parametrize("command", ["upgrade", "runs", "inspect"])
def test_a_refused_connection(command: str) -> None:
    url = f"postgresql+psycopg://u:{SECRET}@127.0.0.1:{unused_port()}/x"
    check(harness_store(command, url), "refused the connection")


@pytest.mark.parametrize("command", ["upgrade", "runs"])
def test_an_unknown_host(command: str) -> None:
    url = f"postgresql+psycopg://u:{SECRET}@no-such-host.invalid/x"
    check(harness_store(command, url), "unknown host 'no-such-host.invalid'")


@pytest.mark.parametrize("command", ["upgrade", "runs"])
def test_a_missing_database(command: str, pg_server_url: str) -> None:
    url = make_url(pg_server_url).set(database="hs_test_never_created", password=SECRET)
    done = harness_store(command, url.render_as_string(hide_password=False))
    check(done, "the database 'hs_test_never_created' does not exist")


@pytest.mark.parametrize("command", ["upgrade", "runs"])
def test_a_missing_role_is_a_failed_connection_not_a_lost_one(
    command: str, pg_server_url: str
) -> None:
    """Before: "the connection to the server was lost" for a connection never made; the
    server's own reason is said as it gave it."""
    url = make_url(pg_server_url).set(username="hs_test_no_such_role", password=SECRET)
    done = harness_store(command, url.render_as_string(hide_password=False))
    check(done, "could not connect to the server", "hs_test_no_such_role")
    assert "was lost" not in done.stderr


@pytest.mark.parametrize("opener", ["Store.open", "AsyncStore.open", "migrate.upgrade"])
def test_without_psycopg_the_package_raises_a_typed_error_naming_the_extra(opener: str) -> None:
    """`Store.open` on a PostgreSQL URL without the `postgresql` extra was a bare
    `ModuleNotFoundError`; it is `MissingDriverError` (still a `ModuleNotFoundError`) with
    the install line the command gives, and the URL's password is never in it."""
    url = f"postgresql+psycopg://u:{SECRET}@127.0.0.1:5432/x"
    probe = (
        "import asyncio, sys\n"
        "sys.modules['psycopg'] = None\n"
        "from harness_store import AsyncStore, Store\n"
        "from harness_store.errors import MissingDriverError\n"
        "from harness_store.schema import migrate\n"
        f"url, opener = {url!r}, {opener!r}\n"
        "try:\n"
        "    if opener == 'Store.open':\n"
        "        Store.open(url)\n"
        "    elif opener == 'AsyncStore.open':\n"
        "        asyncio.run(AsyncStore.open(url))\n"
        "    else:\n"
        "        migrate.upgrade(url)\n"
        "except MissingDriverError as exc:\n"
        "    assert isinstance(exc, ModuleNotFoundError) and exc.name == 'psycopg'\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=environ(), timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert 'pip install ".[postgresql]"' in done.stdout, done.stdout
    assert SECRET not in done.stdout
