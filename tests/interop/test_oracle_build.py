"""The oracle build helper itself: links held as text files (as a copy of the shared folder
may hold them) come back as links, and the build is keyed on the source, so a changed source
is rebuilt."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.provided import unavailable
from support.shared import SHARED

from .oracles import manifest, restore_links
from .releases import RELEASES

SOURCE = SHARED / "oracle"


@pytest.fixture
def source_copy(tmp_path: Path) -> Path:
    if not (SOURCE / "build.sh").exists():
        unavailable(f"no oracle source at {SOURCE}")
    copy = tmp_path / "oracle"
    shutil.copytree(SOURCE, copy, symlinks=True, ignore=shutil.ignore_patterns("target"))
    return copy


def test_every_release_in_the_list_has_a_crate(source_copy: Path) -> None:
    crates = {p.name for p in (source_copy / "crates").iterdir()}
    for release in RELEASES:
        major, minor, *patch = release.parts
        assert f"v{major}_{minor}_{patch[0] if patch else 0}" in crates, release


def test_text_files_standing_for_links_become_links(tmp_path: Path) -> None:
    """A tree of its own, laid out as the shared copy may hold it: links as small text files
    naming their target (a file and a directory), beside a link kept as a link, real source,
    and a text file naming a path that does not exist."""
    upstream = tmp_path / "upstream" / "v0.66.0"
    (upstream / "state").mkdir(parents=True)
    (upstream / "state.rs").write_text("pub mod store;\n")
    crate = tmp_path / "crates" / "v0_66_0" / "src"
    crate.mkdir(parents=True)
    (crate / "state.rs").write_text("../../../upstream/v0.66.0/state.rs\n")
    (crate / "state").write_text("../../../upstream/v0.66.0/state")
    (crate / "error.rs").symlink_to("../../../upstream/v0.66.0/state.rs")
    (crate / "main.rs").write_text("fn main() {}\n")
    (crate / "gone.rs").write_text("../../../upstream/v0.66.0/gone.rs")

    restored = restore_links(tmp_path)

    assert sorted(restored) == [crate / "state", crate / "state.rs"]
    assert (crate / "state.rs").is_symlink()
    assert (crate / "state.rs").read_bytes() == (upstream / "state.rs").read_bytes()
    assert (crate / "state").is_symlink() and (crate / "state").is_dir()
    assert (crate / "error.rs").is_symlink()  # a link already is left as it is
    assert not (crate / "main.rs").is_symlink()  # real source stays a file
    assert not (crate / "gone.rs").is_symlink()  # a path to nothing is not a link
    assert restore_links(tmp_path) == []  # idempotent


def test_the_build_key_follows_the_source(source_copy: Path) -> None:
    before = manifest(source_copy)
    assert manifest(source_copy) == before
    main = source_copy / "crates" / "v0_13_0" / "src" / "main.rs"
    main.chmod(0o644)
    main.write_text(main.read_text() + "\n")
    assert manifest(source_copy) != before
