"""The release names a revision answers to in Alembic, and only its own in `alembic history`.

A release that changed no schema is a branch label of the newest revision at or below it
(`0.29` of `0.28`), so `alembic upgrade 0.29` resolves. Alembic spreads a linear chain's
branch labels over every revision of it (`RevisionMap._add_branches`), so `alembic history`
and `heads` showed all 32 names on each line, in a set's order, which changes with each
process's hash seed. The revisions take their labels from `labels_for`, which also has Alembic
keep each of these labels on its own revision once it has spread them, shown in release order.
Resolution is unchanged: Alembic maps each label to its revision before spreading them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from alembic.script.revision import Revision, RevisionMap

from ..releases import NEWEST_KNOWN_RELEASE, REVISIONS, revision_for

_LABELS: set[str] = set()
"""Every label `labels_for` handed out: the only ones put back on their own revision."""

_KEEPS_OWN = "_harness_store_keeps_own_labels"
"""The mark on the wrapped `_add_branches`, so it is wrapped once per process."""


def _minor(label: str) -> int:
    return int(label.split(".")[1])


def labels_for(revision: str) -> tuple[str, ...]:
    """The release names that mean `revision` without being revisions themselves (the
    releases that changed no schema), oldest first: its `branch_labels`."""
    _keep_own_labels()
    names = (f"0.{minor}" for minor in range(1, _minor(NEWEST_KNOWN_RELEASE) + 1))
    labels = tuple(n for n in names if n not in REVISIONS and revision_for(n) == revision)
    _LABELS.update(labels)
    return labels


class ReleaseLabels(set[str]):
    """A revision's branch labels, iterated (and so shown by Alembic) in release order."""

    def __iter__(self) -> Iterator[str]:
        def order(label: str) -> tuple[int, str]:
            return (_minor(label) if label in _LABELS else 1 << 30, label)

        return iter(sorted(set.__iter__(self), key=order))


def _keep_own_labels() -> None:
    """Wrap Alembic's `RevisionMap._add_branches`, once: after it has spread the labels, every
    revision keeps of `_LABELS` only those it declares. Other chains' labels are left as
    Alembic spreads them."""
    original = RevisionMap._add_branches
    if getattr(original, _KEEPS_OWN, False):
        return

    def _add_branches(self: RevisionMap, revisions: Any, map_: Any) -> None:
        original(self, revisions, map_)
        for revision in {r for r in map_.values() if isinstance(r, Revision)}:
            spread = revision.branch_labels
            if spread & _LABELS:
                own = set(revision._orig_branch_labels)
                revision.branch_labels = ReleaseLabels((spread - _LABELS) | own)

    setattr(_add_branches, _KEEPS_OWN, True)
    setattr(RevisionMap, "_add_branches", _add_branches)  # noqa: B010  # a method, replaced
