"""Every Python example of the README and the documentation runs, so none can drift from the
code: each page's ```python blocks run in order in one namespace, in a fresh working directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .examples import REPO, SKIP, blocks, pages, python_blocks, run_page

RUN = [page for page in pages() if python_blocks(page)]


def test_the_readme_and_the_guides_have_examples() -> None:
    names = {page.relative_to(REPO).as_posix() for page in RUN}
    assert {"README.md", "docs/guides/store.md", "docs/guides/async.md"} <= names


@pytest.mark.parametrize("page", RUN, ids=[p.relative_to(REPO).as_posix() for p in RUN])
def test_page_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_STORE_URL", raising=False)
    run_page(page)


def test_a_skip_marker_skips_only_the_next_block() -> None:
    text = "\n".join(
        [
            "```python",
            "a = 1",
            "```",
            SKIP,
            "",
            "```python",
            "raise SystemExit",
            "```",
            "```python",
            "b = 2",
            "```",
        ]
    )
    found = blocks(text)
    assert [(b.code, b.skipped) for b in found] == [
        ("a = 1\n", False),
        ("raise SystemExit\n", True),
        ("b = 2\n", False),
    ]


def test_a_failing_example_fails_the_page(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 1\n```\n\n```python\nassert x == 2, 'drifted'\n```\n")
    with pytest.raises(AssertionError, match="drifted"):
        run_page(page)


def test_blocks_share_one_namespace_per_page(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 1\n```\n\ntext\n\n```python\ny = x + 1\n```\n")
    assert run_page(page)["y"] == 2
