"""Building and running the oracles: io-harness's own Store code of every release, compiled
from `../shared/oracle` into one CLI per release (`oracle-0_13 open|dump|write|resume|edge`).

The shared folder is read-only, and its crates after 0.13 lay `src/` out through symlinks that
the copy holds as small text files naming the link target. So the source is copied into a
cache outside the checkout (`$HS_ORACLE_CACHE`, default `~/.cache/harness_store/oracle`), each
such file is turned back into its link, and `build.sh` builds there. The build is reused while
the shared source is unchanged (its manifest is a hash of every file), and a file lock keeps
parallel pytest processes from building twice. `HS_ORACLE_BIN=DIR` uses binaries already built
in DIR instead.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

from support import provided

from .releases import RELEASES, OracleRelease

CACHE_ENV = "HS_ORACLE_CACHE"
BIN_ENV = "HS_ORACLE_BIN"
HOW_TO_ENABLE = (
    "the interop tests need the oracles (io-harness's own Store code) built from "
    "../shared/oracle: install Rust (cargo on PATH or in ~/.cargo/bin) and Debian's librust-*-dev "
    "crates (build.sh installs them as root), or point HS_ORACLE_BIN at a folder of built "
    "oracle-* binaries; CI (CI=true) builds them and fails instead of skipping"
)


class OracleUnavailable(RuntimeError):
    """The oracles cannot be built or found here; the message says why."""


def unavailable(exc: OracleUnavailable) -> NoReturn:
    """Skip the test that needs the oracles, saying how to enable them; in CI, fail it."""
    provided.unavailable(f"the oracles are unavailable: {exc}; {HOW_TO_ENABLE}")


@cache
def _built(shared_oracle: Path) -> Path | OracleUnavailable:
    try:
        return build(shared_oracle)
    except OracleUnavailable as exc:
        return exc


def built_oracles(shared_oracle: Path) -> Oracles:
    """Every release's built oracle (`releases.RELEASES`), building the cache once per process;
    skips the calling test locally when the oracles cannot be built, fails it in CI."""
    folder = _built(shared_oracle)
    if isinstance(folder, OracleUnavailable):
        unavailable(folder)
    return Oracles(folder)


def binary(shared_oracle: Path, release: str) -> Path:
    """The built oracle of one release (`"0.66"`), building the cache once per process; skips
    the calling test locally when the oracles cannot be built, fails it in CI."""
    return built_oracles(shared_oracle).folder / f"oracle-{release.replace('.', '_')}"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "harness_store" / "oracle")


def cargo() -> str | None:
    """The cargo executable: on PATH, or rustup's default place."""
    found = shutil.which("cargo")
    if found:
        return found
    home = Path.home() / ".cargo" / "bin" / "cargo"
    return str(home) if home.exists() else None


def manifest(source: Path) -> str:
    """A hash of every file of the oracle source (path and content): the build's key."""
    digest = hashlib.sha256()
    for path in sorted(p for p in source.rglob("*") if p.is_file() or p.is_symlink()):
        if "target" in path.relative_to(source).parts[:1]:
            continue
        digest.update(str(path.relative_to(source)).encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else os.readlink(path).encode())
        digest.update(b"\0")
    return digest.hexdigest()


def restore_links(tree: Path) -> list[Path]:
    """Turn each file under `crates/*/src` whose whole content is a relative path `../…` that
    exists into the symlink it stands for; the links restored."""
    restored = []
    for path in sorted(tree.glob("crates/*/src/**/*")):
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 4096:
            continue
        target = path.read_text(errors="replace").strip()
        if not target.startswith("../") or "\n" in target:
            continue
        if not (path.parent / target).exists():
            continue
        path.unlink()
        path.symlink_to(target)
        restored.append(path)
    return restored


def _writable(tree: Path) -> None:
    for path in [tree, *tree.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IWUSR | stat.S_IRUSR)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(shared_oracle: Path, releases: tuple[OracleRelease, ...] = RELEASES) -> Path:
    """The folder of built oracle binaries, building them into the cache when the shared
    source changed since the last build. Raises `OracleUnavailable`."""
    given = os.environ.get(BIN_ENV)
    if given:
        folder = Path(given)
        _check_binaries(folder, releases)
        return folder
    if not (shared_oracle / "build.sh").exists():
        raise OracleUnavailable(f"no oracle source at {shared_oracle}")
    cache = cache_dir()
    with _locked(cache / "build.lock"):
        key = manifest(shared_oracle)
        stamp = cache / "built.json"
        if stamp.exists():
            built = json.loads(stamp.read_text())
            folder = Path(built["bin"])
            if built.get("manifest") == key and _has_binaries(folder, releases):
                return folder
        if cargo() is None:
            raise OracleUnavailable("cargo is not installed")
        source = cache / "src"
        if source.exists():
            _writable(source)
            shutil.rmtree(source)
        shutil.copytree(
            shared_oracle, source, symlinks=True, ignore=shutil.ignore_patterns("target")
        )
        _writable(source)
        restore_links(source)
        env = dict(os.environ)
        env["HS_ORACLE_TARGET"] = env["CARGO_TARGET_DIR"] = str(cache / "target")
        env["PATH"] = f"{Path(cargo() or '').parent}:{env.get('PATH', '')}"
        done = subprocess.run(
            ["bash", str(source / "build.sh")], env=env, capture_output=True, text=True
        )
        (cache / "build.log").write_text(done.stderr)
        if done.returncode != 0:
            tail = "\n".join(done.stderr.splitlines()[-30:])
            raise OracleUnavailable(
                f"build.sh failed ({done.returncode}); see {cache}/build.log\n{tail}"
            )
        folder = Path(done.stdout.strip().splitlines()[-1])
        _check_binaries(folder, releases)
        stamp.write_text(json.dumps({"manifest": key, "bin": str(folder)}))
        return folder


def _has_binaries(folder: Path, releases: tuple[OracleRelease, ...]) -> bool:
    return all((folder / r.binary).is_file() for r in releases)


def _check_binaries(folder: Path, releases: tuple[OracleRelease, ...]) -> None:
    missing = [r.binary for r in releases if not (folder / r.binary).is_file()]
    if missing:
        raise OracleUnavailable(f"{folder} lacks {', '.join(missing)}")


class Oracles:
    """Runs one release's oracle on a store file."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def run(self, release: OracleRelease, command: str, path: Path, *, check: bool = True) -> str:
        """The command's stdout; raises `AssertionError` with stderr when it fails."""
        done = subprocess.run(
            [str(self.folder / release.binary), command, str(path)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{release.binary} {command} {path} exited {done.returncode}: {done.stderr}"
            )
        return done.stdout

    def json(self, release: OracleRelease, command: str, path: Path) -> Any:
        return json.loads(self.run(release, command, path))

    def dump(self, release: OracleRelease, path: Path) -> Any:
        return self.json(release, "dump", path)

    def written(self, release: OracleRelease, path: Path) -> Any:
        """Run the release's own script into `path`; the release's dump of what it wrote."""
        self.run(release, "write", path)
        return self.dump(release, path)

    def dump_text(self, release: OracleRelease, path: Path) -> str:
        return self.run(release, "dump", path)
