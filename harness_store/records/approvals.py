"""Records of the human-in-the-loop channel: policy refusals and decisions, pending approvals,
questions to a person and plans awaiting a verdict."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
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


@dataclass(frozen=True)
class Question:
    """A question an agent asks a person (0.21): the text, optional context, and the choices
    offered (empty for a free answer)."""

    question: str
    context: str | None = None
    choices: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PendingQuestion:
    """A question as stored: who asked it where, and the answer once a person gave one."""

    id: int
    run_id: int
    step: int
    question: str
    context: str | None
    choices: list[str]
    answer: str | None
    answered_by: str | None
    resolved: bool


@dataclass(frozen=True)
class PlanStep:
    """One step of a proposed plan (0.31): what it will do, and the agent definition that will
    own it (None when the proposing agent does it itself)."""

    intent: str
    agent: str | None = None

    @classmethod
    def new(cls, intent: str) -> Self:
        """A step the proposing agent does itself."""
        return cls(intent)

    def by(self, agent: str) -> Self:
        """The same step, owned by the named agent definition."""
        return replace(self, agent=agent)


@dataclass(frozen=True)
class Plan:
    """A plan proposed for approval: its steps, in order."""

    steps: list[PlanStep] = field(default_factory=list)

    @classmethod
    def new(cls, steps: Iterable[PlanStep]) -> Self:
        """A plan of these steps."""
        return cls(list(steps))


@dataclass(frozen=True)
class PlanVerdict:
    """A person's decision on a plan: approve, revise (with the correction), or cancel."""

    kind: str
    correction: str | None = None

    @classmethod
    def approve(cls) -> Self:
        """Go ahead with the plan as proposed."""
        return cls("approve")

    @classmethod
    def revise(cls, correction: str) -> Self:
        """Send the plan back with a correction."""
        return cls("revise", correction)

    @classmethod
    def cancel(cls) -> Self:
        """Stop: the plan is not to be carried out."""
        return cls("cancel")

    def as_str(self) -> str:
        """The verdict as stored in `plans.verdict`."""
        return self.kind


@dataclass(frozen=True)
class PendingPlan:
    """A plan as stored: who proposed it where, and the verdict once decided."""

    id: int
    run_id: int
    step: int
    plan: Plan
    verdict: PlanVerdict | None
    decided_by: str | None
    resolved: bool
