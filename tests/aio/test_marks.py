"""Reads and writes are marked where each Store method is defined (`store.marks`), and the
marks are what `AsyncStore` runs by.

Every public Store method carries a mark; one added unmarked is found (and run as a write
until marked); a generator (or a method returning one) is marked as one, so its async twin
is an async iterator pulled a page at a time; a mark adds no wrapper to the sync call; and a
generator of reads runs as an async iteration on both backends (real stores).
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
from collections.abc import Callable

from harness_store import AsyncStore, StepRecord, Store
from harness_store.aio.methods import NOT_MIRRORED, access, public_methods, unmarked
from harness_store.store import marks
from harness_store.store.marks import MARK, access_of
from harness_store.store.runs import RunsMixin


def test_every_public_store_method_is_marked_where_it_is_defined() -> None:
    assert unmarked(Store) == set(), "mark it in its mixin (harness_store/store/marks.py)"
    for name in public_methods(Store) - NOT_MIRRORED:
        function = inspect.unwrap(getattr(Store, name))
        defined = next(cls for cls in Store.__mro__ if name in cls.__dict__)
        raw = defined.__dict__[name]
        raw = getattr(raw, "__func__", raw)
        assert MARK in vars(inspect.unwrap(raw)), f"{defined.__name__}.{name} is not marked"
        assert access_of(function) == access(Store, name), name


def test_a_method_added_unmarked_is_found_and_run_as_a_write() -> None:
    class Grown(Store):
        def brand_new(self, run_id: int) -> int:
            return run_id

        @marks.reads
        def marked_read(self, run_id: int) -> int:
            return run_id

    assert unmarked(Grown) == {"brand_new"}
    assert access(Grown, "brand_new").kind == "write"
    assert access(Grown, "marked_read").kind == "read"


def returns_an_iterator(function: Callable[..., object]) -> bool:
    """A generator, or a method that hands back one (`iter_arrow` checks its arguments when
    called, then returns the generator that reads)."""
    returns = str(inspect.signature(function).return_annotation)
    return inspect.isgeneratorfunction(function) or returns.startswith("Iterator[")


def test_iterators_and_only_iterators_are_marked_as_pages() -> None:
    for name in public_methods(Store) - NOT_MIRRORED:
        function = inspect.unwrap(getattr(Store, name))
        assert access(Store, name).iterates == returns_an_iterator(function), name
        twin = getattr(AsyncStore, name)
        if access(Store, name).iterates:
            assert inspect.isasyncgenfunction(twin), name


def test_the_kinds_asyncstore_runs_by_are_the_marks() -> None:
    """Each generated coroutine hands its runner the kind its Store method is marked with."""
    generated = inspect.getsource(importlib.import_module("harness_store.aio.generated"))
    kinds = {"READ": "read", "WRITE": "write", "MAINTENANCE": "maintenance"}
    seen: dict[str, str] = {}
    for node in ast.walk(ast.parse(generated)):
        if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef):
            for call in ast.walk(node):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                    continue
                if call.func.attr in {"_call", "_iterate"}:
                    kind = call.args[0]
                    assert isinstance(kind, ast.Name), node.name
                    seen[node.name] = kinds[kind.id]
                elif call.func.attr == "_local":
                    seen[node.name] = "local"
    assert seen["checkpoint_step"] == "write"
    assert seen["steps"] == "read"
    assert seen["compact"] == "maintenance"
    assert seen["owner"] == "local"
    assert all(kind == access(Store, name).kind for name, kind in seen.items())
    assert set(seen) == public_methods(Store) - NOT_MIRRORED - {"follow", "acquire_lease"}


def test_a_mark_adds_no_wrapper_to_the_sync_call() -> None:
    def probe(self: object) -> None:
        return None

    for decorate in (marks.reads, marks.writes, marks.maintains, marks.local, marks.pages(3)):
        assert decorate(probe) is probe
    # Store's method is the mixin's function itself, or the argument checks' one wrapper of it.
    defined = RunsMixin.__dict__["checkpoint_step"]
    called = Store.checkpoint_step
    assert called is defined or called.__wrapped__ is defined  # type: ignore[attr-defined]


def test_a_generator_of_reads_is_an_async_iteration(store_target: str) -> None:
    async def body() -> list[int]:
        async with await AsyncStore.open(store_target) as store:
            run_id = await store.start_run("pages", "f")
            for n in range(1, 6):
                await store.checkpoint_step(run_id, StepRecord.new(n, f"d{n}", f"r{n}"))
            return [row.step async for row in store.iter_steps(run_id, page=2)]

    assert asyncio.run(asyncio.wait_for(body(), 120)) == [1, 2, 3, 4, 5]


def test_reads_that_keep_what_they_price_say_so() -> None:
    """`@reads` never writes; the spend reads keep the answers they priced (hs3's tables),
    so they are marked `reads_caching`: a read where they run, with a cache they may write."""
    from sqlalchemy import func, select

    from harness_store import Price, PriceTable, ProviderCall, Usage
    from harness_store.models.spend import PRICED_DAYS, PRICED_RUNS

    prices = PriceTable.new("x").with_("m", Price(input=3))
    with Store.memory() as store:
        run = store.start_run("g", "f")
        store.record_provider_call(run, ProviderCall(1, 1, "a", "m", Usage(1, 1, 2), 5))

        def kept() -> int:
            with store.engine.connect() as conn:
                return sum(
                    int(conn.execute(select(func.count()).select_from(t)).scalar_one())
                    for t in (PRICED_DAYS, PRICED_RUNS)
                )

        for name in ("spend_by_model", "spend_by_day", "spend_by_run", "iter_spend_by_run"):
            before = kept()
            list(getattr(store, name)(prices))
            wrote = kept() > before
            mark = access(Store, name)
            assert mark.kind == "read", name
            assert mark.caches or not wrote, f"{name} writes a cache but is marked @reads"
        assert all(access(Store, n).caches for n in ("spend_by_day", "spend_by_run"))
    cached = {n for n in public_methods(Store) - NOT_MIRRORED if access(Store, n).caches}
    assert cached == {"spend_by_model", "spend_by_day", "spend_by_run", "iter_spend_by_run"}
