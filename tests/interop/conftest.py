"""The session's oracles: built once (cached outside the checkout) and shared by every interop
test. Locally, without cargo, the tests that need them skip and say how to enable them; in CI
(`CI=true`) a missing oracle is a failure, never a skip."""

from __future__ import annotations

import os

import pytest
from conftest import SHARED

from .oracles import HOW_TO_ENABLE, Oracles, OracleUnavailable, build


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def oracles() -> Oracles:
    """The built oracles of every release in `releases.RELEASES`."""
    try:
        return Oracles(build(SHARED / "oracle"))
    except OracleUnavailable as exc:
        if in_ci():
            pytest.fail(f"CI must run the interop tests, but the oracles are unavailable: {exc}")
        pytest.skip(f"{exc}; {HOW_TO_ENABLE}")
