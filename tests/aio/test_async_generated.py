"""`AsyncStore`'s typed methods are generated from `Store` (`scripts/generate_async.py`): the
generated module is current, and every public Store method has its coroutine with the same
parameters."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

from harness_store import AsyncStore, Store
from harness_store.aio.methods import NOT_MIRRORED, public_methods

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_methods_are_current() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate_async.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_store_method_is_an_explicit_coroutine_with_its_parameters() -> None:
    names = public_methods(Store) - NOT_MIRRORED
    assert names
    for name in names:
        method = inspect.getattr_static(AsyncStore, name, None)
        for klass in AsyncStore.__mro__:
            if name in klass.__dict__:
                method = klass.__dict__[name]
                break
        assert method is not None, name
        assert inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method), name
        ours = list(inspect.signature(method).parameters.values())[1:]
        theirs = list(inspect.signature(getattr(Store, name)).parameters.values())[1:]
        assert [(p.name, p.kind, p.default) for p in ours] == [
            (p.name, p.kind, p.default) for p in theirs
        ], name


def test_the_up_to_date_check_compares_content_not_layout() -> None:
    """A formatter that lays the file out otherwise (here: a longer line length) leaves it
    current; a changed docstring or call does not."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import generate_async
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    written = (ROOT / "harness_store" / "aio" / "generated.py").read_text()
    relaid = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--line-length", "140", "-"],
        input=written,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert relaid != written
    assert generate_async.same_content(relaid, written)
    doc = '"""The highest step number recorded for a run, or 0 — the resume point."""'
    assert doc in written
    assert not generate_async.same_content(written.replace(doc, '"""Another text."""'), written)
    call = 'self._call(READ, "last_step"'
    assert call in written
    assert not generate_async.same_content(
        written.replace(call, 'self._call(WRITE, "last_step"'), written
    )


def test_each_coroutine_carries_its_store_methods_docstring() -> None:
    for name in public_methods(Store) - NOT_MIRRORED - {"follow", "acquire_lease"}:
        ours = inspect.getdoc(getattr(AsyncStore, name))
        assert ours == inspect.getdoc(getattr(Store, name)), name
