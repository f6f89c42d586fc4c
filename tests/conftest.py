"""Shared fixtures: real SQLite files in tmp dirs, a real PostgreSQL database per test, and
copies of the real io-harness fixture stores.

PostgreSQL tests run when `HARNESS_STORE_PG_URL` names a server (e.g.
`postgresql+psycopg://postgres@127.0.0.1:5432/test`); each test gets an empty database of its
own on that server (`DatabasePool`). Without the variable they skip, saying how to enable them.
"""

from __future__ import annotations

import compileall
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.new_stores import NEW_STORE, NewStore
from support.pg_databases import (
    PG_ENV,
    PG_SKIP,
    close_pools,
    fresh_pg_database,
    store_location,
)

# Helpers live in `support`; the names below stay importable from here for modules that still
# import them from `conftest`.
from support.provided import unavailable
from support.shared import (  # noqa: F401
    FIXTURE_STORES,
    FIXTURES,
    REPO,
    SHARED,
    copy_fixture,
    in_newest_memory_order,
)

from harness_store import Store


@pytest.fixture
def fixture_copy(tmp_path: Path) -> object:
    """Factory: `fixture_copy("io-harness-0.22.0/populated")` → path of a writable copy."""
    return lambda name: copy_fixture(name, tmp_path)


@pytest.fixture(scope="session")
def pg_server_url() -> str:
    """The PostgreSQL server URL from the environment, or skip."""
    url = os.environ.get(PG_ENV)
    if not url:
        unavailable(PG_SKIP)
    return url


@pytest.fixture
def pg_url(pg_server_url: str) -> Iterator[str]:
    """An empty PostgreSQL database for this test alone (see `DatabasePool`)."""
    yield from fresh_pg_database(pg_server_url)


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile the package and the tests once, before any worker starts, as an install
    leaves a package. Where `PYTHONDONTWRITEBYTECODE` is set (as on CI's machines) nothing
    else writes the cache, and every process a test starts (the command, worker scripts)
    would compile each module it imports again: about 0.17 s of CPU a process."""
    if not hasattr(config, "workerinput"):
        for tree in (REPO / "harness_store", REPO / "tests"):
            compileall.compile_dir(tree, quiet=1)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker per CPU and one more. With one per CPU the CPUs are a third idle
    (the suite waits on fsync, subprocesses and PostgreSQL); the extra worker fills that."""
    return (os.cpu_count() or 1) + 1


SHARED_SCOPES = {
    "tests/otel/test_otel_phoenix.py": "phoenix",
    "tests/otel/test_otel_cli.py": "phoenix",
    "tests/otel/test_otel_tool_calls.py": "phoenix",
}
"""Modules `loadscope` sends to one worker together: those reading spans back from Phoenix,
so the suite starts one Phoenix server (20-40 s of CPU each) rather than one per worker."""


LONG_FIRST = (
    "tests/sync/test_quarantine.py",
    "tests/test_value_paths.py",
    "tests/sync/test_follow.py",
    "tests/sync/test_foreign_values.py",
    "tests/cli/test_copy_interrupted.py",
)
"""Modules of the default tier that take minutes on one worker (CI's `--durations`), sent
first (each part of one in `SPREAD`). `loadscope` sends the modules with the most tests
first, so a long module of few tests (processes, a store at scale) could start late and end
the run alone on one worker while the others stand idle; started first, the short modules
fill in around it."""


SPREAD = {
    "tests/test_value_paths.py": 3,
    "tests/sync/test_quarantine.py": 2,
    "tests/sync/test_follow.py": 2,
}
"""Long modules whose tests share no module fixture and time nothing against each other: their
tests are dealt in turn into this many units of work, which `loadscope` sends to different
workers, rather than one unit that holds one worker for minutes (the run's end waited on it)."""


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadscope` with the groups of `SHARED_SCOPES`: a grouped module's tests are one
    unit of work with the group's other modules (xdist's own `loadfile` is built the same way,
    on `_split_scope`); a module of `SPREAD` is that many units; the modules of `LONG_FIRST`
    are sent first."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedScopes(LoadScopeScheduling):  # type: ignore[misc]
        ordered = False
        parts: dict[str, int] | None = None

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module in SPREAD:
                return f"{module}::part {self._part(nodeid)}"
            return SHARED_SCOPES.get(module) or super()._split_scope(nodeid)

        def _part(self, nodeid: str) -> int:
            """Which of its module's `SPREAD` units a test is in: the module's tests in
            collection order, dealt in turn (the collection is known before any scope is)."""
            if self.parts is None:
                self.parts = {}
                dealt: dict[str, int] = {}
                for test in self.collection or ():
                    module = test.split("::", 1)[0]
                    if module in SPREAD:
                        self.parts[test] = dealt.get(module, 0) % SPREAD[module]
                        dealt[module] = dealt.get(module, 0) + 1
            return self.parts[nodeid]

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the queue is built, nothing is sent yet
                self.ordered = True
                # the long modules' first parts in their order, then their second parts, …
                rank = {module: i for i, module in enumerate(LONG_FIRST)}
                first = sorted(
                    (s for s in self.workqueue if s.split("::", 1)[0] in rank),
                    key=lambda s: (s.partition("::part ")[2], rank[s.split("::", 1)[0]]),
                )
                for scope in reversed(first):
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return SharedScopes(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`slow_on(backend)`: mark that backend's half of a two-backend test `slow`, before the
    tiers are selected (`-m 'not slow'`), so the default tier keeps the other half."""
    for item in items:
        for mark in item.iter_markers("slow_on"):
            params = getattr(getattr(item, "callspec", None), "params", {})
            values = [v for p in params.values() for v in (p if isinstance(p, tuple) else (p,))]
            if mark.args[0] in values:
                item.add_marker(pytest.mark.slow)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Drop the pooled PostgreSQL databases of this process."""
    close_pools()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a test's store lives: a SQLite file, or a fresh PostgreSQL database."""
    yield from store_location(request.param, tmp_path / "runs.sqlite3")


@pytest.fixture(params=["Store", "AsyncStore"])
def store_api(request: pytest.FixtureRequest) -> Any:
    """Which API the Store tests drive: `Store` itself, or `AsyncStore` through
    `asyncfacade.BlockingAsyncStore` (the same tests, every call a task on an event loop)."""
    if request.param == "Store":
        return Store
    from support.asyncfacade import BlockingAsyncStore

    return BlockingAsyncStore


@pytest.fixture
def store(store_target: str, store_api: Any, new_store: NewStore) -> Iterator[Store]:
    """An open Store on each backend, through each API (`store_api`), new and empty: a copy
    of one `Store.open` created (`NewStore`)."""
    new_store.place(store_target)
    with store_api.open(store_target) as opened:
        yield opened


@pytest.fixture(scope="session")
def new_store() -> NewStore:
    """This process's `NewStore` (`support.new_stores.NEW_STORE`)."""
    return NEW_STORE
