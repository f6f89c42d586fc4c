"""Questions to a person (0.21) and plans awaiting a verdict (0.31): the half of the
human-in-the-loop channel where a run pauses on a person's words, not on a yes or no.

Upstream keeps these in `approvals.rs`. Choices and plan steps are stored as upstream's
compact JSON; a value that does not parse reads as empty, as upstream reads it. A question is
answered once and a plan decided once: the first answer wins, a second changes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import insert, select, update

from .. import models as m
from ..errors import InvalidValueError, ResumeError
from ..formats import opt_text, text, u32
from ..records import PendingPlan, PendingQuestion, Plan, PlanStep, PlanVerdict, Question
from .marks import reads, writes
from .release_tables import OlderStoreMixin

VERDICTS = ("approve", "revise", "cancel")


def compact_json(value: Any) -> str:
    """serde_json's `to_string`: no spaces, non-ASCII kept as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def read_choices(stored: str | None) -> list[str]:
    """A question's choices; empty when absent or not a JSON list of strings."""
    if stored is None:
        return []
    try:
        value = json.loads(stored)
    except ValueError:
        return []
    if isinstance(value, list) and all(isinstance(c, str) for c in value):
        return value
    return []


def read_steps(stored: str) -> list[PlanStep]:
    """A plan's steps; empty when the JSON is not a list of `{intent, agent?}` objects."""
    try:
        value = json.loads(stored)
    except ValueError:
        return []
    if not isinstance(value, list):
        return []
    steps = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("intent"), str):
            return []
        agent = item.get("agent")
        if agent is not None and not isinstance(agent, str):
            return []
        steps.append(PlanStep(item["intent"], agent))
    return steps


def plan_steps_json(plan: Plan) -> str:
    """A plan's steps as upstream stores them: `agent` only when there is one."""
    out = []
    for s in plan.steps:
        item = {"intent": text(s.intent, "intent")}
        if s.agent is not None:
            item["agent"] = text(s.agent, "agent")
        out.append(item)
    return compact_json(out)


def question_row(*r: Any) -> PendingQuestion:
    return PendingQuestion(
        int(r[0]), int(r[1]), int(r[2]), r[3], r[4], read_choices(r[5]), r[6], r[7], r[8] != 0
    )


def plan_row(*r: Any) -> PendingPlan:
    verdict: PlanVerdict | None = None
    if r[4] == "approve":
        verdict = PlanVerdict.approve()
    elif r[4] == "revise":
        verdict = PlanVerdict.revise(r[5] or "")
    elif r[4] == "cancel":
        verdict = PlanVerdict.cancel()
    return PendingPlan(
        int(r[0]), int(r[1]), int(r[2]), Plan(read_steps(r[3])), verdict, r[6], r[7] != 0
    )


def _question_columns() -> tuple[Any, ...]:
    q = m.PendingQuestion
    return (
        q.id,
        q.run_id,
        q.step,
        q.question,
        q.context,
        q.choices,
        q.answer,
        q.answered_by,
        q.resolved,
    )


def _plan_columns() -> tuple[Any, ...]:
    p = m.Plan
    return (p.id, p.run_id, p.step, p.steps, p.verdict, p.correction, p.decided_by, p.resolved)


class QuestionsMixin(OlderStoreMixin):
    """Questions and plans: upstream's `approvals.rs`, second half."""

    @writes
    def put_question(self, run_id: int, step: int, q: Question) -> int:
        """Persist a question for a person; return its id. No choices store as NULL."""
        choices = None
        if q.choices:
            choices = compact_json([text(c, "choice") for c in q.choices])
        statement = (
            insert(m.PendingQuestion)
            .values(
                run_id=run_id,
                step=u32(step, "step"),
                question=text(q.question, "question"),
                context=opt_text(q.context, "context"),
                choices=choices,
            )
            .returning(m.PendingQuestion.id)
        )
        with self._write() as conn:
            return int(conn.execute(statement).scalar_one())

    @reads
    def question(self, question_id: int) -> PendingQuestion | None:
        """A question by id, answered or not."""
        if self._lacks("pending_questions"):
            return None
        statement = select(*_question_columns()).where(m.PendingQuestion.id == question_id)
        found = self._rows(statement, question_row)
        return found[0] if found else None

    @reads
    def answered_question(self, run_id: int, step: int, question: str) -> PendingQuestion | None:
        """The newest answered question with this text at this step of the run: what a resumed
        run reads instead of asking again."""
        if self._lacks("pending_questions"):
            return None
        q = m.PendingQuestion
        statement = (
            select(*_question_columns())
            .where(q.run_id == run_id, q.step == step, q.question == question, q.resolved == 1)
            .order_by(q.id.desc())
            .limit(1)
        )
        found = self._rows(statement, question_row)
        return found[0] if found else None

    @writes
    def answer_question(self, question_id: int, answer: str, by: str) -> bool:
        """Answer a question; True if this call answered it, False when it was answered
        already (the first answer stands). `ResumeError` for a question that does not exist."""
        q = m.PendingQuestion
        with self._write() as conn:
            changed = conn.execute(
                update(q)
                .where(q.id == question_id, q.resolved == 0)
                .values(answer=text(answer, "answer"), answered_by=text(by, "by"), resolved=1)
            ).rowcount
            if changed == 1:
                return True
            exists = conn.execute(select(q.id).where(q.id == question_id)).first()
        if exists is None:
            raise ResumeError(f"no question {question_id} to answer")
        return False

    @reads
    def questions(self, run_id: int) -> list[PendingQuestion]:
        """Every question of a run, in order."""
        if self._lacks("pending_questions"):
            return []
        q = m.PendingQuestion
        statement = select(*_question_columns()).where(q.run_id == run_id).order_by(q.id)
        return self._rows(statement, question_row)

    @writes
    def put_plan(self, run_id: int, step: int, plan: Plan) -> int:
        """Persist a plan awaiting a verdict; return its id."""
        statement = (
            insert(m.Plan)
            .values(run_id=run_id, step=u32(step, "step"), steps=plan_steps_json(plan))
            .returning(m.Plan.id)
        )
        with self._write() as conn:
            return int(conn.execute(statement).scalar_one())

    @reads
    def plan(self, plan_id: int) -> PendingPlan | None:
        """A plan by id, decided or not."""
        if self._lacks("plans"):
            return None
        found = self._rows(select(*_plan_columns()).where(m.Plan.id == plan_id), plan_row)
        return found[0] if found else None

    @reads
    def approved_plan(self, run_id: int) -> Plan | None:
        """The newest plan of the run a person approved, if any."""
        if self._lacks("plans"):
            return None
        p = m.Plan
        statement = (
            select(*_plan_columns())
            .where(p.run_id == run_id, p.verdict == "approve")
            .order_by(p.id.desc())
            .limit(1)
        )
        found = self._rows(statement, plan_row)
        return found[0].plan if found else None

    @writes
    def decide_plan(self, plan_id: int, verdict: PlanVerdict, by: str) -> bool:
        """Decide a plan; True if this call decided it, False when it was decided already.
        `ResumeError` for a plan that does not exist."""
        if verdict.kind not in VERDICTS:
            raise InvalidValueError(f"plan verdict must be one of {VERDICTS}, got {verdict.kind!r}")
        correction = None
        if verdict.kind == "revise":
            correction = text(verdict.correction or "", "correction")
        p = m.Plan
        with self._write() as conn:
            changed = conn.execute(
                update(p)
                .where(p.id == plan_id, p.resolved == 0)
                .values(
                    verdict=verdict.kind,
                    correction=correction,
                    decided_by=text(by, "by"),
                    resolved=1,
                )
            ).rowcount
            if changed == 1:
                return True
            exists = conn.execute(select(p.id).where(p.id == plan_id)).first()
        if exists is None:
            raise ResumeError(f"no plan {plan_id} to decide")
        return False

    @reads
    def plans(self, run_id: int) -> list[PendingPlan]:
        """Every plan of a run, in order."""
        if self._lacks("plans"):
            return []
        p = m.Plan
        return self._rows(
            select(*_plan_columns()).where(p.run_id == run_id).order_by(p.id), plan_row
        )
