"""Records of the human-in-the-loop channel: policy refusals and decisions, pending approvals."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Self

from .base import _Constructor


@dataclass(frozen=True)
class PolicyEvent:
    """A policy refusal or a human decision on a sensitive action. Never file contents."""

    step: int
    kind: str
    act: str
    target: str
    rule: str | None = None
    layer: str | None = None
    decision: str | None = None
    source: str | None = None
    performed: str | None = None

    @classmethod
    def refusal(cls, step: int, act: str, target: str) -> Self:
        """An action refused by the policy."""
        return cls(step, "refusal", act, target)

    def with_rule(self, rule: str, layer: str) -> Self:
        """Attribute the event to the rule and layer that produced it."""
        return replace(self, rule=rule, layer=layer)

    def with_performed(self, performed: str) -> Self:
        """Record that the action performed differed from the one requested."""
        return replace(self, performed=performed)


def _policy_decision(
    cls: type[PolicyEvent], step: int, act: str, target: str, decision: str, source: str
) -> PolicyEvent:
    """A human (or built-in approver) decision on a sensitive action."""
    return cls(step, "decision", act, target, decision=decision, source=source)


# `decision` is both a field and upstream's named constructor: see `_Constructor`.
PolicyEvent.decision = _Constructor(_policy_decision)  # type: ignore[assignment]


@dataclass(frozen=True)
class Pending:
    """An action paused for a human decision, persisted so it outlives the process."""

    id: int
    run_id: int
    step: int
    act: str
    target: str
    content: str | None = None
    resolved: str | None = None
