"""A run's summaries and todo list: folded summaries of its history (0.43) and the agent's
plan, its todo list (0.21).

Upstream keeps these in `memory.rs`; they live apart here only to keep files small. Not
"notes": upstream's notes are memory entries (`memory.py`).
"""

from __future__ import annotations

from sqlalchemy import delete, insert, select

from .. import models as m
from ..errors import InvalidValueError
from ..formats import text as check_text
from ..formats import u32, u64
from ..records import Summary, TodoItem, TodoState
from .marks import reads, writes
from .release_tables import OlderStoreMixin

TODO_MAX_ITEMS = 64
"""Most items a run's todo list keeps; the rest are dropped (and counted)."""
TODO_TEXT_CAP = 200
"""Most characters one todo item keeps."""


def summary(id: int, through: int, folded: int, txt: str, est: int, at: str) -> Summary:
    return Summary(int(id), int(through), int(folded), txt, int(est), at)


class SummariesTodosMixin(OlderStoreMixin):
    """Summaries and todos: upstream's `memory.rs`, second half."""

    @writes
    def put_summary(
        self, run_id: int, through_step: int, folded: int, text: str, est_tokens: int
    ) -> int:
        """Record one fold of a run's history before the ledger is edited; `folded` is how
        many entries from the front the text stands in for. Returns the summary's id."""
        s = m.Summary
        statement = (
            insert(s)
            .values(
                run_id=run_id,
                through_step=u32(through_step, "through_step"),
                folded=u32(folded, "folded"),
                text=check_text(text, "text"),
                est_tokens=u64(est_tokens, "est_tokens"),
            )
            .returning(s.id)
        )
        with self._write() as conn:
            return int(conn.execute(statement).scalar_one())

    def _summaries(self, run_id: int, folded: int | None = None) -> list[Summary]:
        if self._lacks("summaries"):
            return []
        s = m.Summary
        statement = select(s.id, s.through_step, s.folded, s.text, s.est_tokens, s.at).where(
            s.run_id == run_id
        )
        if folded is not None:
            statement = statement.where(s.folded == folded).order_by(s.id.desc()).limit(1)
        else:
            statement = statement.order_by(s.id)
        return self._rows(statement, summary)

    @reads
    def summary_for(self, run_id: int, folded: int) -> Summary | None:
        """The newest fold of a run at one ledger position (`folded`), if any: keyed on the
        position, not the step, so a resumed run finds the fold it already paid for."""
        found = self._summaries(run_id, folded)
        return found[0] if found else None

    @reads
    def summaries(self, run_id: int) -> list[Summary]:
        """Every fold of a run, oldest first."""
        return self._summaries(run_id)

    @writes
    def write_todos(self, run_id: int, items: list[TodoItem]) -> int:
        """Replace a run's todo list wholesale, in one transaction (a reader sees the old list
        or the new one). At most `TODO_MAX_ITEMS` items of at most `TODO_TEXT_CAP` characters
        are kept; returns how many items were dropped."""
        kept = items[:TODO_MAX_ITEMS]
        rows = []
        for position, item in enumerate(kept):
            if not isinstance(item.state, TodoState):
                raise InvalidValueError(f"todo state must be a TodoState, got {item.state!r}")
            rows.append(
                {
                    "run_id": run_id,
                    "position": position,
                    "text": check_text(item.text, "text")[:TODO_TEXT_CAP],
                    "state": item.state.value,
                }
            )
        t = m.Todo
        with self._write() as conn:
            conn.execute(delete(t).where(t.run_id == run_id))
            if rows:
                conn.execute(insert(t), rows)
        return len(items) - len(kept)

    @reads
    def todos(self, run_id: int) -> list[TodoItem]:
        """A run's todo list in the order written; empty when it never wrote one or cleared
        it. A row with a state this release does not know is skipped."""
        if self._lacks("todos"):
            return []
        t = m.Todo
        statement = select(t.text, t.state).where(t.run_id == run_id).order_by(t.position)
        known = {s.value: s for s in TodoState}
        with self._read() as conn:
            return [
                TodoItem(txt, known[state])
                for txt, state in conn.execute(statement)
                if state in known
            ]
