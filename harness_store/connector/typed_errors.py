"""How errors leave a connector: typed by the one translation (`translation`), a full disk
named by the store whose disk it is, and a connection lost at COMMIT marked as one that may
have committed (`TypedErrors`, which `Connector` is)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, NoReturn

from sqlalchemy.engine import URL

from ..dialects import Backend
from ..errors import DiskFullError, StoreConnectionError, StoreError
from ..targets import where
from . import translation


class TypedErrors:
    """A connector's ways of raising what its statements raise as typed `StoreError`s, over
    its `backend` and the `url` of its store."""

    backend: Backend
    url: URL

    def commit(self, commit: Callable[[], Any], rollback: Callable[[], Any] | None = None) -> None:
        """Run a write transaction's COMMIT (`commit`). A connection lost now cannot say whether
        the server received COMMIT and kept the write: it leaves as `StoreConnectionError` with
        `may_have_committed` True, so no caller retries a write the server may hold. Any other
        error leaves as it is, the transaction ended first (`rollback`): a COMMIT SQLite refuses
        (a full disk) leaves SQLAlchemy's transaction open, and the connection would refuse
        every later call of the Store."""
        try:
            commit()
        except Exception as exc:
            if rollback is not None:
                with suppress(Exception):
                    rollback()
            typed = self.typed(exc)
            if not isinstance(typed, StoreConnectionError):
                raise
            typed.may_have_committed = True
            raise typed from exc

    @contextmanager
    def translated(self) -> Iterator[None]:
        """Turn driver errors into typed `StoreError`s (locked, read-only, …)."""
        try:
            yield
        except StoreError:
            raise
        except Exception as exc:
            self.raise_typed(exc)

    def raise_typed(
        self,
        exc: Exception,
        *,
        may_have_committed: bool = False,
        connection_intact: bool | None = None,
    ) -> NoReturn:
        """Raise `exc` as its typed `StoreError`, or unchanged when it is no database error.

        `may_have_committed` is true for a statement that was its own commit and for a
        transaction's COMMIT: the server may have received it, and a lost connection then
        cannot say whether the server kept it. `connection_intact`: the state of the driver
        connection the statement ran on, when the caller ran it there itself (see
        `translated`)."""
        if isinstance(exc, StoreError):
            raise exc
        typed = self.typed(exc, connection_intact=connection_intact)
        if typed is None:
            raise exc
        if isinstance(typed, StoreConnectionError):
            typed.may_have_committed = may_have_committed
        raise typed from exc

    def raise_on(
        self, dbapi_connection: Any, exc: Exception, *, may_have_committed: bool = False
    ) -> NoReturn:
        """`raise_typed` for an error a statement run straight on `dbapi_connection` raised,
        told by that connection's state whether it was lost (see `translated`)."""
        intact = self.backend.connection_intact(dbapi_connection)
        self.raise_typed(exc, may_have_committed=may_have_committed, connection_intact=intact)

    def typed(self, exc: Exception, *, connection_intact: bool | None = None) -> StoreError | None:
        """The `StoreError` for a database error, or None for an error that is not one (the
        one translation, `translation.typed`), a full disk named by the store whose disk it is."""
        typed = translation.typed(self.backend, exc, connection_intact=connection_intact)
        if isinstance(typed, DiskFullError):
            return DiskFullError(f"{where(self.url)}: {typed}")
        return typed

    def error_of(self, exc: Exception, *, interrupted: Exception | None = None) -> BaseException:
        """A caller's own error for `exc` raised while its write was committed by any thread
        (a new object per caller): typed when it is a database error; `interrupted` when given
        and it is none (the call's own non-database error, raised as itself); else a
        `StoreError` saying the write was not committed."""
        if isinstance(exc, StoreError):
            return copy.copy(exc)
        typed = self.typed(exc)
        if typed is not None:
            typed.__cause__ = exc
            return typed
        if interrupted is not None:
            return interrupted
        return StoreError(f"not committed: {type(exc).__name__}: {exc}")
