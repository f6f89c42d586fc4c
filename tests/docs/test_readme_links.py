"""The README's relative links point at files of the checkout, and it stays a front door."""

from __future__ import annotations

import re

from .examples import REPO

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_readme_links_resolve() -> None:
    links = [t for t in LINK.findall((REPO / "README.md").read_text()) if "://" not in t]
    assert "docs/guides/store.md" in links
    broken = [t for t in links if not (REPO / t).exists()]
    assert broken == []


def test_readme_stays_short() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) < 200
