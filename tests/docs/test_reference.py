"""The API reference covers every public name: each `::: name` of the reference pages imports,
every public name of the package is on one of them, and each has a docstring of its own (the
reference renders docstrings, and an undocumented name would be an empty entry)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from collections.abc import Iterator

import pytest

import harness_store
from harness_store import errors, models, records
from harness_store.aio import AsyncStore

from .examples import REPO

REFERENCE = REPO / "docs" / "reference"
DIRECTIVE = re.compile(r"^::: ([\w.]+)", re.MULTILINE)


def directives() -> list[str]:
    pages = sorted(REFERENCE.glob("*.md"))
    return [name for page in pages for name in DIRECTIVE.findall(page.read_text())]


def resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            value = getattr(value, attribute)
        return value
    raise LookupError(dotted)


def own_docstring(value: object) -> str | None:
    """The docstring written for `value`, not one Python or dataclasses made up for it."""
    is_class = isinstance(value, type)
    doc = value.__dict__.get("__doc__") if is_class else getattr(value, "__doc__", None)
    made_up = is_class and dataclasses.is_dataclass(value) and f"{value.__name__}("
    if made_up and isinstance(doc, str) and doc.startswith(made_up):
        return None  # the signature dataclasses writes when a class has no docstring
    return doc.strip() if isinstance(doc, str) and doc.strip() else None


def public_api() -> Iterator[tuple[str, object]]:
    """The public names the reference documents: the package's, the errors, models, records."""
    for name in harness_store.__all__:
        yield f"harness_store.{name}", getattr(harness_store, name)
    for module in (errors, models, records):
        names = getattr(module, "__all__", None) or [n for n in vars(module) if n[0] != "_"]
        for name in names:
            value = getattr(module, name)
            if inspect.isclass(value) and value.__module__.startswith("harness_store"):
                yield f"{module.__name__}.{name}", value


def test_every_reference_directive_imports() -> None:
    found = directives()
    assert "harness_store.Store" in found
    for dotted in found:
        resolve(dotted)


def documents(dotted: str, value: object) -> bool:
    """Whether the directive `::: dotted` renders `value`: it names it, or names the module
    that defines it (a module directive renders its members)."""
    target = resolve(dotted)
    if target is value:
        return True
    return inspect.ismodule(target) and getattr(value, "__module__", None) == target.__name__


def test_every_public_class_is_on_a_reference_page() -> None:
    found = directives()
    missing = [
        path
        for path, value in public_api()
        if (inspect.isclass(value) or inspect.isfunction(value))
        and not any(documents(dotted, value) for dotted in found)
    ]
    assert missing == []


@pytest.mark.parametrize("path, value", list(public_api()), ids=[p for p, _ in public_api()])
def test_public_name_has_a_docstring(path: str, value: object) -> None:
    if not (inspect.isclass(value) or inspect.isfunction(value)):
        return  # constants are documented by the attribute docstrings beside them
    assert own_docstring(value), f"{path} has no docstring"


@pytest.mark.parametrize("cls", [harness_store.Store, AsyncStore], ids=["Store", "AsyncStore"])
def test_every_public_method_has_a_docstring(cls: type) -> None:
    undocumented = [
        name
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_")
        and (inspect.isfunction(member) or isinstance(inspect.getattr_static(cls, name), property))
        and not (inspect.getdoc(member) or "").strip()
    ]
    assert undocumented == []
