"""`Store`: io-harness's run store API in Python, over SQLite or PostgreSQL.

The methods, their names, argument order and row formats are upstream's (0.13's, and 0.66's
for memory, questions and plans, sessions and retention, mailbox, queue and handles), so a run
written here resumes in io-harness and a run written there reads here. The concerns live in
their own modules, mirroring upstream's `src/state/` split — runs, trace (+ step attempts,
stream), approvals (+ questions), agents (+ mailbox), memory (+ summaries and todos), sessions
(+ retention) — and meet in this class, none overriding another, so the order of its bases
decides nothing. What they share is `StoreBase`'s:
the named ways to the database (`base`) and the checkpoint path (`checkpoints.Checkpoints`).

Code above the Store reads beside its methods through `read_snapshot` and `whole_snapshot`
(here), and an `AsyncStore` opens its reader with `read_only_twin`. What only the package's
own command and OTLP exporter read is not the Store's: they compose a reader over a Store
(`listings.Listings`, `trace_view.TraceView`, `trace_export.TraceExport`), which reaches the
database through the same named ways. The Store's public names are listed in
`tests/store/test_public_names.py`, so the API grows only on purpose.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Self, TypeVar

from sqlalchemy import Column, Connection, Engine, MetaData, String, Table, insert
from sqlalchemy.engine import URL

from ..connector import Connector
from ..dialects import backend_named
from ..dialects.read_only_files import names_uri
from ..engine import make_engine, read_only_url, to_url, where
from ..errors import InvalidValueError, UpgradeRequiredError
from ..formats import CHECKPOINT_FORMAT
from ..models import Base
from ..models.run_tokens import RUN_TOKENS_METADATA
from ..models.spend import SPEND_METADATA
from ..releases import HEAD
from ..schema.copy_marker import refuse_unfinished_copy
from ..schema.detect import Diagnosis, check_sqlite_file, diagnose, read_revision, refuse_unreadable
from ..schema.preflight import check_readable
from ..targets import Target, TargetLike
from .accounting import AccountingMixin
from .agents import AgentsMixin
from .approvals import ApprovalsMixin
from .arguments import checked_arguments
from .arrow import ArrowMixin
from .base import StoreBase
from .check import CheckMixin
from .leases import Lease, LeasesMixin
from .mailbox import MailboxMixin
from .memory import MemoryMixin
from .questions import QuestionsMixin
from .run_pruning import RunPruningMixin
from .runs import RunsMixin
from .session_retention import SessionRetentionMixin
from .sessions import SessionsMixin
from .step_attempts import StepAttemptsMixin
from .store_space import StoreSpaceMixin
from .stream import StreamMixin
from .summaries_todos import SummariesTodosMixin
from .trace import TraceMixin

__all__ = ["Lease", "Store"]

S = TypeVar("S", bound="Store")


@checked_arguments
class Store(
    LeasesMixin,
    RunsMixin,
    TraceMixin,
    StepAttemptsMixin,
    StreamMixin,
    AccountingMixin,
    ApprovalsMixin,
    AgentsMixin,
    MemoryMixin,
    QuestionsMixin,
    MailboxMixin,
    SummariesTodosMixin,
    SessionsMixin,
    SessionRetentionMixin,
    StoreSpaceMixin,
    CheckMixin,
    ArrowMixin,
    RunPruningMixin,
):
    """A persisted run store. Use `Store.open` for a file or URL, `Store.memory` for a
    throwaway in-memory store. Safe to share between threads; usable as a context manager."""

    def __init__(
        self,
        engine_url: URL,
        *,
        synchronous: str | None = None,
        busy_timeout: float | None = None,
        engine: Engine | None = None,
        connector: Connector | None = None,
        url: URL | None = None,
        read_only: bool = False,
        spend_keeper: Store | None = None,
        upgrade_report: object | None = None,
    ) -> None:
        """A Store speaking to `engine_url` (prefer `open`, which checks and upgrades).

        `engine` is a prebuilt engine (an asyncio engine's `sync_engine`, for `AsyncStore`),
        `connector` a prebuilt connector over it; `url` is the store's URL as named when the
        engine's differs (a read-only open's); `read_only` says the store is opened for
        reading only; `spend_keeper` is the writable Store of the same database through which
        a read-only one keeps the spend answers it prices; `upgrade_report` is what opening
        found and did."""
        backend = backend_named(engine_url.get_backend_name())
        if engine is None:
            engine = make_engine(engine_url, synchronous=synchronous, busy_timeout=busy_timeout)
        super().__init__(
            engine,
            backend,
            engine_url,
            busy_timeout=busy_timeout,
            connector=connector,
            read_only=read_only,
            spend_keeper=spend_keeper,
        )
        if url is not None:
            self.url = url
        self.upgrade_report = upgrade_report
        """What `open` found and did when it had to upgrade the store (a
        `migrate.UpgradeReport`), else None."""

    @classmethod
    def open(
        cls,
        target: TargetLike,
        *,
        upgrade: bool = True,
        backup: bool = True,
        synchronous: str | None = None,
        read_only: bool = False,
        busy_timeout: float | None = None,
        schema: str | None = None,
    ) -> Self:
        """Open (creating if absent) the store at a file path or SQLAlchemy URL (or a
        `targets.Target` parsed before).

        A store older than this package's schema is upgraded in place through the Alembic
        chain (after a backup, unless `backup=False`), as upstream's own open migrates;
        with `upgrade=False` it is refused with `UpgradeRequiredError` and left unchanged. A
        store already at head opens without loading Alembic. File stores are put in WAL with a
        5 s busy timeout, like upstream 0.12+. `synchronous` ("full" by default, as upstream,
        or "normal") trades durability of the last commits on power loss for speed.
        `busy_timeout` (seconds, 5 by default as upstream; SQLite) is how long a write waits
        for other writers before `StoreLockedError`: first in the queue harness_store's
        writers to one file join (fair turns), then on SQLite's own lock.

        `read_only=True` opens a store that holds the whole 0.13 schema (at head, an
        untracked 0.13 store, or a newer release's) for reading only: nothing is upgraded,
        stamped or switched, and every write raises `StoreAccessError`. A read-only file is
        fine.

        `schema` (PostgreSQL) keeps the store in a schema of its own, beside an application's
        tables in one database: every table of the store and `alembic_version` live in it
        (created by the upgrade, owned by the role that opens it); a plain lower-case
        identifier. On SQLite it raises `InvalidTargetError`, nothing created.
        """
        parsed = Target.parse(target, read_only=read_only, schema=schema)
        if parsed.memory:
            if parsed.read_only:
                raise InvalidValueError("an in-memory store cannot be opened read-only")
            return cls.memory(synchronous=synchronous)
        if parsed.read_only:
            return open_read_only(cls, parsed)[0]
        path = parsed.path
        report = None
        if path is not None:
            check_sqlite_file(
                path, missing=None if upgrade else " (open with upgrade=True to create one)"
            )
            if not path.exists():
                from ..schema.migrate import upgrade as run_upgrade

                report = run_upgrade(parsed.url, backup=False)
        store = cls(
            parsed.url, synchronous=synchronous, busy_timeout=busy_timeout, upgrade_report=report
        )
        try:
            store._ensure_schema(upgrade=upgrade, backup=backup)
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def memory(cls, *, synchronous: str | None = None) -> Self:
        """An in-memory store at the head schema, for tests and throwaway runs (also what
        `Store.open(":memory:")` returns)."""
        store = cls(to_url(":memory:"), synchronous=synchronous)
        with store._write() as conn:
            create_head_schema(conn)
        return store

    def _ensure_schema(self, *, upgrade: bool, backup: bool) -> None:
        with self._read() as conn:
            refuse_unfinished_copy(conn, where(self.url))
            # A newer checkpoint format at head opens, as upstream opens it; only resuming
            # its runs is refused (`check_resumable`).
            at_head = read_revision(conn) == HEAD
            if not at_head:
                found = diagnose(conn)
        if not at_head:
            if not upgrade:
                shown = where(self.url)
                raise UpgradeRequiredError(
                    f"{shown}: {found.describe()}; this package needs revision {HEAD}. "
                    f"Upgrade it with `harness-store upgrade {shown}` "
                    f"(or `alembic -x db={shown} upgrade head`), or open it with upgrade=True"
                )
            from ..schema.migrate import upgrade as run_upgrade  # Alembic only when there is work

            with self._released():
                self.upgrade_report = run_upgrade(self.url, backup=backup)
        with self._read() as conn:
            switch = self._backend.needs_wal_switch(conn)
        if switch:
            with self._maintenance() as driver:
                self._backend.switch_to_wal(driver)

    def __enter__(self) -> Self:
        return self


def open_read_only(
    cls: type[S],
    target: TargetLike,
    *,
    refuse: bool = True,
    shape: bool = False,
    refuse_newer_format: bool = False,
    text_factory: Callable[[bytes], str] | None = None,
    spend_keeper: Store | None = None,
    upgrade_command: str | None = None,
) -> tuple[S, Diagnosis]:
    """The one read-only open (`Store.open(read_only=True)`, the CLI's read commands, the
    origins of a central store): the Store, and what the store was found to be.

    A SQLite file is checked before SQLite opens it (missing, no database, an unfinished
    transaction) and read through `mode=ro`, `immutable=1` while nobody writes it (the
    dialect decides, `dialects.read_only_files`); PostgreSQL through read-only transactions. With
    `refuse`, a store that cannot be read without an upgrade is refused
    (`detect.refuse_unreadable`, naming `upgrade_command`); without it the caller decides
    from the diagnosis (`shape`: with every table's columns). A store whose checkpoint format
    is newer than this package's opens (only resuming its runs is refused), unless
    `refuse_newer_format` (the command's reads refuse it). `text_factory` decodes SQLite
    text (the CLI shows bytes that are not UTF-8 replaced instead of failing)."""
    parsed = Target.parse(target, read_only=True)
    url, path, shown = parsed.url, parsed.path, parsed.where
    if parsed.memory:
        raise InvalidValueError("an in-memory store cannot be opened read-only")
    if path is not None and not names_uri(url):
        check_sqlite_file(path, writable=False, missing="")
        check_readable(path)  # a hot journal: say so, not "readonly database"
    opened = read_only_url(url)
    engine = make_engine(opened)
    if text_factory is not None:
        backend_named(opened.get_backend_name()).decode_with(engine, text_factory)
    store = cls(opened, engine=engine, url=url, read_only=True, spend_keeper=spend_keeper)
    try:
        with store._read() as conn:
            found = diagnose(conn, shape=shape, refuse_newer_format=refuse_newer_format)
            refuse_unfinished_copy(conn, shown)
        if refuse:
            refuse_unreadable(found, shown, upgrade_command or f"`harness-store upgrade {shown}`")
    except BaseException:
        store.close()
        raise
    return store, found


def read_only_twin(store: S) -> S:
    """A read-only Store of the same file as `store`, keeping the spend answers it prices
    through `store` (an `AsyncStore`'s reader beside its writer)."""
    return open_read_only(type(store), store.url, spend_keeper=store)[0]


def read_snapshot(store: StoreBase) -> AbstractContextManager[Connection]:
    """One read transaction on `store`'s connector, for query builders reading beside the
    Store's methods (the CLI's listings): one snapshot, on the Store's own connection."""
    return store._read()  # type: ignore[no-any-return]


def whole_snapshot(store: StoreBase) -> AbstractContextManager[Connection]:
    """One read transaction on `store`'s connector in which every statement sees the same
    instant (`Connector.snapshot`): sync's and copy's reads of a whole source."""
    return store._snapshot()


def create_head_schema(conn: Connection) -> None:
    """Build the head schema directly from the models (in-memory stores, which have no file
    for the chain to open): the same tables (and hs3's triggers) as the chain, the format
    marker, the stamp."""
    Base.metadata.create_all(conn)
    backend = backend_named(conn.dialect.name)
    SPEND_METADATA.create_all(conn)  # hs3's counters, and their triggers
    for statement in backend.spend_triggers_sql():
        conn.exec_driver_sql(statement)
    RUN_TOKENS_METADATA.create_all(conn)  # hs6's run token totals, and their triggers
    for statement in backend.run_tokens_triggers_sql():
        conn.exec_driver_sql(statement)
    for statement in backend.call_tokens_triggers_sql():  # hs7's, in the same metadata
        conn.exec_driver_sql(statement)
    backend.set_checkpoint_format(conn, CHECKPOINT_FORMAT)
    version = Table(
        "alembic_version",
        MetaData(),
        Column("version_num", String(32), primary_key=True),
    )
    version.create(conn)
    conn.execute(insert(version).values(version_num=HEAD))
