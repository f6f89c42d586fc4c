"""Every error a caller of the package can meet is defined in `harness_store.errors`, so the
errors reference page (which renders that one module) lists them all."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import harness_store
from harness_store import errors

INTERNAL = {
    "harness_store.cli.app.CliError": "the command's own usage signal, turned into an exit code",
    "harness_store.cli.app.OutputClosed": "a closed pipe, turned into a quiet exit",
    "harness_store.cli.copy.Stopped": "a signal taken at a batch, turned into the copy's cleanup",
    "harness_store.policy.PolicyFormatError": "always re-raised as InvalidValueError/ResumeError",
    "harness_store.otel.transport.BatchFailed": "turned into an ExportError saying what landed",
    "harness_store.store.price_sql.InexactSums": "answered again exactly from the rows",
    "harness_store.sync.follow._Stopped": "a pass still running after a stop, rolled back",
    "harness_store.sync.origin_state.Overtaken": "a sliced pass another pass of its origin "
    "overtook: it stops, and the other sends the rest",
    "harness_store.transfer.reading.WriterAppeared": "a torn read, read again",
    "harness_store.sync.quarantine.Unreadable": "a pass made again, holding the runs whose "
    "text is not UTF-8",
}
"""Control-flow signals that never leave the package, each with what becomes of it."""


def test_every_error_class_is_defined_in_the_errors_module() -> None:
    elsewhere = set()
    for info in pkgutil.walk_packages(harness_store.__path__, "harness_store."):
        if info.name.startswith("harness_store.migrations.") or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and info.name != errors.__name__
            ):
                elsewhere.add(f"{info.name}.{name}")
    assert elsewhere == set(INTERNAL)


def test_the_moved_errors_are_still_importable_where_they_are_raised() -> None:
    from harness_store.schema.copy_marker import IncompleteCopyError
    from harness_store.sync import DuplicateOriginError, SyncRefusedError
    from harness_store.transfer import CopyError, CopyVerificationError

    for error in (IncompleteCopyError, DuplicateOriginError, SyncRefusedError, CopyError):
        assert error is getattr(errors, error.__name__)
    assert issubclass(CopyVerificationError, errors.StoreError)
