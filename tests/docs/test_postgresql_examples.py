"""The documentation's PostgreSQL examples (a block after `<!-- example: postgresql -->`) run,
each page's in order in one namespace, against an empty database of the test's own in place
of the URL they name."""

from __future__ import annotations

from pathlib import Path

import pytest

from .examples import EXAMPLE_URL, REPO, pages, postgresql_blocks

RUN = [page for page in pages() if postgresql_blocks(page)]


def test_the_postgresql_and_analysis_guides_have_postgresql_examples() -> None:
    names = {page.relative_to(REPO).as_posix() for page in RUN}
    assert {"docs/guides/postgresql.md", "docs/guides/analysis.md"} <= names


@pytest.mark.parametrize("page", RUN, ids=[p.relative_to(REPO).as_posix() for p in RUN])
def test_postgresql_examples_run(
    page: Path, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__main__"}
    for block in postgresql_blocks(page):
        assert EXAMPLE_URL in block.code, f"{page}:{block.line} names no {EXAMPLE_URL}"
        code = compile(block.code.replace(EXAMPLE_URL, pg_url), f"{page}:{block.line}", "exec")
        exec(code, namespace)
