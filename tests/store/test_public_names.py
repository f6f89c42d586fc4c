"""The Store's public names are the documented ones: the table of `docs/reference/store.md`
lists every name by concern, and the class holds exactly those, so the API grows or shrinks
only on purpose (a name added to the class fails here until it is documented).

`AsyncStore` mirrors the same names (`scripts/generate_async.py`), and what the command and
the OTLP export read beside the Store is theirs (`store.listings`, `store.trace_view`,
`store.trace_export`): no name of those readers is on either class.
"""

from __future__ import annotations

import re

from support.shared import REPO

from harness_store import AsyncStore, Store
from harness_store.store.listings import Listings
from harness_store.store.trace_export import TraceExport
from harness_store.store.trace_view import TraceView

TABLE_ROW = re.compile(r"^\| (`[\w.]+`|attributes) \| (.+) \|$", re.MULTILINE)


def documented() -> dict[str, str]:
    """Each documented name -> the row (module) that lists it."""
    page = (REPO / "docs" / "reference" / "store.md").read_text(encoding="utf-8")
    names: dict[str, str] = {}
    for row, cell in TABLE_ROW.findall(page):
        for name in re.findall(r"`(\w+)`", cell):
            assert name not in names, f"{name} is listed twice"
            names[name] = row
    return names


def public(names: object) -> set[str]:
    return {n for n in dir(names) if not n.startswith("_")}


def test_the_store_has_exactly_the_documented_names() -> None:
    with Store.memory() as store:
        actual = public(store)
    listed = set(documented())
    assert sorted(actual - listed) == [], "public but not in docs/reference/store.md's table"
    assert sorted(listed - actual) == [], "in docs/reference/store.md's table but not public"


def test_each_name_is_listed_under_the_module_that_defines_it() -> None:
    import inspect

    wrong = []
    for name, row in documented().items():
        if row == "attributes":
            continue
        static = inspect.getattr_static(Store, name)
        found = getattr(static, "__func__", static)
        found = inspect.unwrap(getattr(found, "fget", found))
        module = found.__module__.removeprefix("harness_store.store").removeprefix(".")
        if f"`{module or '__init__'}`" != row:
            wrong.append(f"{name}: listed under {row}, defined in {module or '__init__'}")
    assert wrong == []


def test_async_store_mirrors_the_store_and_adds_only_its_own() -> None:
    own = {"store", "upgrade_report", "url"}  # the Store it drives, and that Store's attributes
    assert public(AsyncStore) - public(Store) <= own
    assert public(Store) - {"upgrade_report", "url"} <= public(AsyncStore)


def test_the_command_s_and_the_exporter_s_reads_are_not_the_store_s() -> None:
    """The names they had on the Store (`span_runs`, …, `run_header`, `trace_entries`, the
    listings) are gone from it; the exporter's own `runs`, `steps`, … differ from upstream's
    methods of those names (they carry row ids and stamps) and live on `TraceExport` only."""
    spans = {f"span_{n}" for n in public(TraceExport) - {"store"}}
    views = {f"run_{n}" for n in public(TraceView) - {"store", "entries"}} | {"trace_entries"}
    named = public(Listings) - {"store"} | spans | views
    assert len(named) == 16
    assert public(Store) & named == set()
    assert public(AsyncStore) & named == set()
