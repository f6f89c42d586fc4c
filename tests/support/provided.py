"""What CI provides — PostgreSQL, the shared fixtures, the oracles, the OTLP receivers — and the
one way a test says one is missing: `unavailable` skips it locally, saying how to enable it,
and fails it under `CI=true`, where a skip would make a green run that did not run everything."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """True under CI (`CI=true`, as `.ci/run` sets it)."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(message: str) -> NoReturn:
    """Skip the calling test because something CI provides is missing here; under CI, fail it."""
    if in_ci():
        pytest.fail(f"CI must run this test, but {message}")
    pytest.skip(message)
