"""The credentials people already use, on a PostgreSQL server of the test's own that takes only
TLS with a password (`support.pg_server`): `.pgpass`, libpq's environment (`PGHOST`, `PGUSER`,
`PGSSLMODE`…), a service file, and `sslmode=verify-full` with the server's authority — for
`Store.open` and the command alike, no password on a command line. A certificate from another
authority or a wrong password is refused with a typed error (one line from the command), and no
password is ever printed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.clirun import run_in_process
from support.pg_server import DATABASE, PASSWORD, ROLE, OwnServer, own_server

from harness_store import AsyncStore, Store
from harness_store.errors import StoreError


@pytest.fixture(scope="module")
def server() -> Iterator[OwnServer]:
    with own_server() as started:
        yield started


@pytest.fixture
def pgpass(server: OwnServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "pgpass"
    path.write_text(f"localhost:{server.port}:{DATABASE}:{ROLE}:{PASSWORD}\n")
    path.chmod(0o600)  # libpq ignores a password file others may read
    monkeypatch.setenv("PGPASSFILE", str(path))
    return path


def written_and_listed(target: str, goal: str) -> None:
    """A run written through `Store.open(target)` is listed by `harness-store runs target`."""
    with Store.open(target) as store:
        store.start_run(goal, "/w")
    done = run_in_process("runs", target)
    assert done.returncode == 0, done.stderr
    assert goal in done.stdout
    assert PASSWORD not in done.stdout + done.stderr


def test_a_password_file_and_verify_full(server: OwnServer, pgpass: Path) -> None:
    written_and_listed(server.url(sslmode="verify-full", sslrootcert=str(server.ca)), "pgpass")


def test_asyncstore_reads_the_same_credentials(server: OwnServer, pgpass: Path) -> None:
    target = server.url(sslmode="verify-full", sslrootcert=str(server.ca))

    async def write_and_read() -> tuple[int, list[int]]:
        async with await AsyncStore.open(target) as store:
            return await store.start_run("async", "/w"), await store.runs()

    run, runs = asyncio.run(write_and_read())
    assert run in runs


def test_libpqs_environment(
    server: OwnServer, pgpass: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        "PGHOST": "localhost",
        "PGPORT": str(server.port),
        "PGUSER": ROLE,
        "PGDATABASE": DATABASE,
        "PGSSLMODE": "verify-full",
        "PGSSLROOTCERT": str(server.ca),
    }.items():
        monkeypatch.setenv(name, value)
    written_and_listed("postgresql://", "environment")


def test_a_service_file(
    server: OwnServer, pgpass: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = tmp_path / "pg_service.conf"
    services.write_text(
        f"[harness]\nhost=localhost\nport={server.port}\ndbname={DATABASE}\nuser={ROLE}\n"
        f"sslmode=verify-full\nsslrootcert={server.ca}\n"
    )
    monkeypatch.setenv("PGSERVICEFILE", str(services))
    written_and_listed("postgresql:///?service=harness", "service")


def test_a_certificate_from_another_authority_is_refused(server: OwnServer, pgpass: Path) -> None:
    target = server.url(sslmode="verify-full", sslrootcert=str(server.other_ca))
    with pytest.raises(StoreError):
        Store.open(target)
    done = run_in_process("runs", target)
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_a_wrong_password_is_refused_and_never_printed(server: OwnServer) -> None:
    wrong = "n0t-the-Pw"
    target = server.url(sslmode="verify-full", sslrootcert=str(server.ca)).replace(
        f"{ROLE}@", f"{ROLE}:{wrong}@"
    )
    with pytest.raises(StoreError) as refused:
        Store.open(target)
    assert wrong not in str(refused.value)
    done = run_in_process("runs", target)
    assert done.returncode != 0
    assert wrong not in done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
