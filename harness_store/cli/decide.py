"""`harness-store approve` and `harness-store answer`: a person's side of the human-in-the-loop
channel, from a shell. A paused io-harness run resumes with what is decided here.

Both open the store for writing through `Store.open` without upgrading it (an older store is
refused, exit 3). A decision is taken once: an item someone else decided first is reported as
such and left as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import DiskFullError, UpgradeRequiredError
from .app import (
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    MAX_INT,
    CliError,
    DbArg,
    JsonOpt,
    RunArg,
    SchemaOpt,
    app,
)
from .output import emit_json, stdout_console, visible
from .reader import in_schema, parse_target, suggest

IdOpt = Annotated[
    int | None, typer.Option("--id", help="Only this request, plan or question.", max=MAX_INT)
]
ByOpt = Annotated[str, typer.Option("--by", help="Who decided (recorded with plans and answers).")]


if TYPE_CHECKING:
    from ..store import Store

    pass


def open_writer(db: str) -> Store:
    """The store for writing, as it is: never upgraded by a decision."""
    from ..releases import HEAD
    from ..store import Store  # the ORM Store only when a command writes

    target = parse_target(db)
    try:
        return Store.open(target, upgrade=False)
    except UpgradeRequiredError:
        raise UpgradeRequiredError(
            f"{target.where} is not at this package's schema ({HEAD}); run "
            f"{suggest('upgrade', target.url, ' first')} (nothing was changed)"
        ) from None


@contextmanager
def unchanged_on_full_disk(db: str, undone: str) -> Iterator[None]:
    """A write of the store `db` that runs out of space (its open, a backup, the write
    itself: each rolled back) as one `DiskFullError` naming the store and saying what was
    `undone` ("nothing was decided")."""
    from ..schema.preflight import is_disk_full

    try:
        yield
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        raise DiskFullError(
            f"{parse_target(db).where}: the disk is full; {undone}: the store is as it was. "
            "Free some space and run it again"
        ) from None


def say(line: str) -> None:
    from rich.text import Text

    stdout_console().print(Text(line))


@app.command("approve")
def approve_command(
    db: DbArg,
    run: RunArg,
    request_id: IdOpt = None,
    deny: Annotated[bool, typer.Option("--deny", help="Deny instead of approving.")] = False,
    plan: Annotated[
        bool, typer.Option("--plan", help="Decide the run's open plans, not its actions.")
    ] = False,
    revise: Annotated[
        str | None, typer.Option("--revise", help="With --plan: send back with this correction.")
    ] = None,
    cancel: Annotated[bool, typer.Option("--cancel", help="With --plan: cancel it.")] = False,
    by: ByOpt = "human",
    as_json: JsonOpt = False,
    schema: SchemaOpt = None,
) -> None:
    """Decide a paused run's pending actions (approve, or --deny), or with --plan its proposed
    plans (approve, --revise TEXT, or --cancel): every open one, or only --id."""
    db = in_schema(db, schema)
    from ..records import PlanVerdict

    if not plan and (revise is not None or cancel):
        raise CliError(EXIT_USAGE, "--revise and --cancel decide plans: add --plan")
    if plan and deny:
        raise CliError(EXIT_USAGE, "a plan is approved, revised or cancelled, not denied")
    if revise is not None and cancel:
        raise CliError(EXIT_USAGE, "--revise and --cancel are two different verdicts; pick one")
    decided: list[dict[str, object]] = []
    with unchanged_on_full_disk(db, "nothing was decided"), open_writer(db) as store:
        if store.status(run) is None:
            raise CliError(EXIT_NOT_FOUND, f"no run with id {run} in the store")
        if plan:
            verdict = (
                PlanVerdict.revise(revise)
                if revise is not None
                else PlanVerdict.cancel()
                if cancel
                else PlanVerdict.approve()
            )
            open_plans = [p for p in store.plans(run) if not p.resolved]
            targets = [p.id for p in open_plans if request_id in (None, p.id)]
            what = "plan"
        else:
            verdict = None
            targets = [p.id for p in store.unresolved_approvals(run) if request_id in (None, p.id)]
            what = "request"
        if not targets:
            which = f" {request_id}" if request_id is not None else "s"
            raise CliError(EXIT_NOT_FOUND, f"run {run} has no open {what}{which} to decide")
        for target in targets:
            if verdict is not None:
                done = store.decide_plan(target, verdict, by)
                word = verdict.kind
            else:
                word = "deny" if deny else "approve"
                done = store.resolve_pending(target, word)
            decided.append({what: target, "decision": word, "decided": done})
    if as_json:
        emit_json({"run": run, "decided": decided})
        return
    for item in decided:
        state = "" if item["decided"] else " (already decided by someone else; left as it was)"
        say(f"{what} {item[what]} of run {run}: {item['decision']}{state}")


@app.command("answer")
def answer_command(
    db: DbArg,
    run: RunArg,
    answer: Annotated[str, typer.Argument(metavar="ANSWER", help="The answer to give.")],
    question_id: IdOpt = None,
    by: ByOpt = "human",
    as_json: JsonOpt = False,
    schema: SchemaOpt = None,
) -> None:
    """Answer a paused run's open question (the oldest, or --id); an answer must be one of the
    question's choices when it offers some."""
    db = in_schema(db, schema)
    with unchanged_on_full_disk(db, "nothing was answered"), open_writer(db) as store:
        if store.status(run) is None:
            raise CliError(EXIT_NOT_FOUND, f"no run with id {run} in the store")
        open_ = [q for q in store.questions(run) if not q.resolved]
        chosen = [q for q in open_ if question_id in (None, q.id)][:1]
        if not chosen:
            which = f" {question_id}" if question_id is not None else ""
            raise CliError(EXIT_NOT_FOUND, f"run {run} has no open question{which} to answer")
        question = chosen[0]
        if question.choices and answer not in question.choices:
            offered = ", ".join(visible(c) for c in question.choices)
            raise CliError(
                EXIT_USAGE, f"question {question.id} offers: {offered}; got {visible(answer)}"
            )
        done = store.answer_question(question.id, answer, by)
    if as_json:
        emit_json({"run": run, "question": question.id, "answer": answer, "answered": done})
        return
    state = "" if done else " (already answered by someone else; left as it was)"
    say(f"question {question.id} of run {run} ({visible(question.question)}): {answer}{state}")
