"""The models page names every class that is both a record and a table, and no other, so a
reader who meets one of those names knows to look at the module it came from."""

from __future__ import annotations

import dataclasses
import re

import harness_store
from harness_store import models
from harness_store.models.base import Base

from .examples import REPO

SECTION = re.compile(r"## A record and a table of the same name\n(.*?)(?:\n## |\Z)", re.DOTALL)


def test_the_models_page_lists_exactly_the_names_that_are_both() -> None:
    both = set(harness_store.__all__) & set(models.__all__)
    page = (REPO / "docs" / "reference" / "models.md").read_text()
    section = SECTION.search(page)
    assert section is not None
    listed = set(re.findall(r"`([A-Z]\w+)`", section.group(1).split("```")[0]))
    assert listed == both
    for name in both:
        assert dataclasses.is_dataclass(getattr(harness_store, name)), name
        assert issubclass(getattr(models, name), Base), name
