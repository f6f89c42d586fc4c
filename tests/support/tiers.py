"""The default tier's sample of a sweep: a parametrization over many values (releases,
revisions, damaged pages, side files) runs a few of them by default, spread from the first to
the last, and the rest in the slow tier (`pytest -m slow`); CI runs both."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest


def spread(count: int, keep: int) -> set[int]:
    """`keep` indexes of `count`, evenly spread, the first and the last among them."""
    if count <= keep:
        return set(range(count))
    if keep == 1:
        return {0}
    return {round(i * (count - 1) / (keep - 1)) for i in range(keep)}


def sampled(
    values: Sequence[Any],
    *,
    keep: int = 3,
    ids: Callable[[Any], str] | Sequence[str] | None = None,
    several: bool = False,
) -> list[Any]:
    """`values` as parameters: `keep` of them spread over the sweep in the default tier, the
    others marked `slow`. `several`: each value is a tuple of several arguments' values."""
    chosen = spread(len(values), keep)
    names = [
        (ids(v) if callable(ids) else ids[i]) if ids is not None else None
        for i, v in enumerate(values)
    ]
    return [
        pytest.param(
            *(v if several else (v,)), marks=() if i in chosen else pytest.mark.slow, id=names[i]
        )
        for i, v in enumerate(values)
    ]
