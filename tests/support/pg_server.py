"""A PostgreSQL server of a test's own: a fresh cluster (`initdb`, run as the `postgres` user)
on a free loopback port that takes only TLS connections with a password (scram-sha-256), its
certificate signed by a certificate authority made for it. For the tests of the credentials
people already use — libpq's environment, service files, `.pgpass`, `sslmode=verify-full` —
which the shared test server (trust, no TLS) cannot show."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .provided import unavailable

ROLE = "agent"
PASSWORD = "s3cret-Pw"
DATABASE = "runs"


@dataclass(frozen=True)
class OwnServer:
    """Where the server listens, and the files a client trusts it with."""

    port: int
    ca: Path
    """The certificate authority that signed the server's certificate."""
    other_ca: Path
    """An authority that did not: `verify-full` against it must fail."""
    directory: Path

    def url(self, *, password: bool = False, **query: str) -> str:
        secret = f":{PASSWORD}" if password else ""
        params = "&".join(f"{k}={v}" for k, v in query.items())
        return f"postgresql://{ROLE}{secret}@localhost:{self.port}/{DATABASE}" + (
            f"?{params}" if params else ""
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(*args: str | Path) -> None:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]} exited {done.returncode}: {done.stderr.strip()}")


def _as_postgres(*args: str | Path) -> None:
    _run("runuser", "-u", "postgres", "--", *args)


def _authority(directory: Path, name: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}.key", directory / f"{name}.crt"
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", f"/CN={name}", "-keyout", key, "-out", cert)  # fmt: skip
    return key, cert


def _binaries() -> Path | None:
    found = shutil.which("initdb")
    if found is None:
        return None
    return Path(os.path.realpath(found)).parent


@contextmanager
def own_server() -> Iterator[OwnServer]:
    """Start the server in a directory of its own under the system's temporary directory
    (where `postgres` can reach it, unlike pytest's private one); stop and remove it after."""
    binaries = _binaries()
    if binaries is None or os.geteuid() != 0 or shutil.which("openssl") is None:
        unavailable("an own PostgreSQL server needs initdb, openssl and root (to run as postgres)")
    postgres = pwd.getpwnam("postgres")
    directory = Path(tempfile.mkdtemp(prefix="hs-own-pg-"))
    try:
        with _started(binaries, postgres, directory) as server:
            yield server
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def _started(binaries: Path, postgres: pwd.struct_passwd, directory: Path) -> Iterator[OwnServer]:
    ca_key, ca = _authority(directory, "test-ca")
    _, other_ca = _authority(directory, "other-ca")
    key, request, cert = (
        directory / "server.key",
        directory / "server.csr",
        directory / "server.crt",
    )
    _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
         "-keyout", key, "-out", request)  # fmt: skip
    (directory / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _run("openssl", "x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key,
         "-CAcreateserial", "-days", "2", "-extfile", directory / "san.ext",
         "-out", cert)  # fmt: skip
    data = directory / "data"
    for path in (directory, key, cert):
        os.chown(path, postgres.pw_uid, postgres.pw_gid)
    key.chmod(0o600)
    directory.chmod(0o755)
    _as_postgres(binaries / "initdb", "-D", data, "-U", "postgres", "--auth-local=trust",
                 "--auth-host=reject", "-E", "UTF8")  # fmt: skip
    port = _free_port()
    with (data / "postgresql.conf").open("a") as conf:
        conf.write(
            f"port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = "
            f"'{directory}'\nssl = on\nssl_cert_file = '{cert}'\nssl_key_file = '{key}'\n"
            "fsync = off\nshared_buffers = 16MB\n"
        )
    (data / "pg_hba.conf").write_text(
        "local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n"
        "host all all 127.0.0.1/32 reject\n"
    )
    _as_postgres(binaries / "pg_ctl", "-D", data, "-l", directory / "server.log", "-w", "start")
    try:
        psql = [binaries / "psql", "-h", directory, "-p", str(port), "-U", "postgres", "-q",
                "-v", "ON_ERROR_STOP=1", "-c"]  # fmt: skip
        _as_postgres(*psql, f"CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}'")
        _as_postgres(*psql, f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
        yield OwnServer(port, ca, other_ca, directory)
    finally:
        _as_postgres(binaries / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
