"""The session's oracles: built once (cached outside the checkout) and shared by every interop
test. Locally, without cargo, the tests that need them skip and say how to enable them; in CI
(`CI=true`) a missing oracle is a failure, never a skip."""

from __future__ import annotations

import pytest
from support.shared import SHARED

from .oracles import Oracles, built_oracles


@pytest.fixture(scope="session")
def oracles() -> Oracles:
    """The built oracles of every release in `releases.RELEASES`."""
    return built_oracles(SHARED / "oracle")
