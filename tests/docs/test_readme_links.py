"""The README's relative links point at files of the checkout (the documentation pages
other branches are still writing are named in the site's pending-pages hook)."""

from __future__ import annotations

import importlib.util
import re

from .examples import REPO

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def pending_pages() -> set[str]:
    spec = importlib.util.spec_from_file_location(
        "pending_pages", REPO / "docs" / "_hooks" / "pending_pages.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {f"docs/{name}" for name in module.PENDING}


def test_readme_links_resolve() -> None:
    links = [t for t in LINK.findall((REPO / "README.md").read_text()) if "://" not in t]
    assert "docs/guides/store.md" in links
    pending = pending_pages()
    broken = [t for t in links if not (REPO / t).exists() and t not in pending]
    assert broken == []


def test_readme_stays_short() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) < 200
