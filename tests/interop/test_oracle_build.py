"""The oracle build helper itself: the links the shared copy holds as text files come back as
links, and the build is keyed on the source, so a changed source is rebuilt."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import SHARED

from .oracles import manifest, restore_links
from .releases import RELEASES

SOURCE = SHARED / "oracle"


@pytest.fixture
def source_copy(tmp_path: Path) -> Path:
    if not (SOURCE / "build.sh").exists():
        pytest.skip(f"no oracle source at {SOURCE}")
    copy = tmp_path / "oracle"
    shutil.copytree(SOURCE, copy, symlinks=True, ignore=shutil.ignore_patterns("target"))
    return copy


def test_every_release_in_the_list_has_a_crate(source_copy: Path) -> None:
    crates = {p.name for p in (source_copy / "crates").iterdir()}
    for release in RELEASES:
        major, minor, *patch = release.parts
        assert f"v{major}_{minor}_{patch[0] if patch else 0}" in crates, release


def test_text_files_standing_for_links_become_links(source_copy: Path) -> None:
    crate = source_copy / "crates" / "v0_66_0" / "src"
    assert not (crate / "state.rs").is_symlink()
    restored = restore_links(source_copy)
    assert crate / "state.rs" in restored and crate / "state" in restored
    assert (crate / "state.rs").read_bytes() == (
        source_copy / "upstream" / "v0.66.0" / "state.rs"
    ).read_bytes()
    assert (crate / "state").is_dir()
    assert not (crate / "main.rs").is_symlink()  # real source stays a file
    assert restore_links(source_copy) == []  # idempotent


def test_the_build_key_follows_the_source(source_copy: Path) -> None:
    before = manifest(source_copy)
    assert manifest(source_copy) == before
    main = source_copy / "crates" / "v0_13_0" / "src" / "main.rs"
    main.chmod(0o644)
    main.write_text(main.read_text() + "\n")
    assert manifest(source_copy) != before
