"""What an upgrade found and did (`UpgradeReport`), said line by line to the upgrade's logger."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .detect import Diagnosis

log = logging.getLogger("harness_store.schema.migrate")
"""The upgrade's logger, named for `migrate` (the name the docs give, and a user's logging
configuration filters on), whichever module of the procedure says the line."""


@dataclass
class UpgradeReport:
    """What an upgrade found and did, for a caller or a person."""

    url: str
    found: Diagnosis | None = None
    before: str | None = None
    """The revision the upgrade started from (as found once it held the lock)."""
    after: str | None = None
    stamped: str | None = None
    backup: Path | None = None
    messages: list[str] = field(default_factory=list)
    raced: bool = False
    """The store needed work when first looked at, but another upgrade did it while this one
    waited for the lock: this one changed nothing and wrote no backup."""
    stage: str = "checking"
    """How far the upgrade got: checking, backup, upgrade, done."""
    on_message: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    """Called with each line as it happens (e.g. to print `found:` before anything changes)."""

    @property
    def changed(self) -> bool:
        """Whether this upgrade changed the store (a revision step or a stamp)."""
        if self.stage != "done" or self.raced:
            return False
        return self.before != self.after or self.stamped is not None

    def say(self, message: str) -> None:
        """Record a line, log it (the `alembic` command shows it), pass it to `on_message`."""
        self.messages.append(message)
        log.info("%s", message)
        if self.on_message is not None:
            self.on_message(message)
