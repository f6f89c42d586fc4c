"""Agent trees, second half: the mailbox between agents of one tree (0.60), the queue of
children waiting to be spawned (0.32), names in a tree, and background processes' handles and
output (0.25).

The queue's dequeue is one `DELETE` of the entry: of several consumers racing for one entry,
exactly one sees it removed (True) and the rest see nothing (False).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert, literal_column, select, update
from sqlalchemy import text as sql_text

from .. import models as m
from ..formats import opt_text, text, u32, u64
from ..records import AgentMessage, ProcessHandle
from .agents import tree_ids
from .base import StoreBase
from .marks import reads, writes
from .release_tables import OlderStoreMixin

# `ON CONFLICT … DO NOTHING` is upstream's `INSERT OR IGNORE` in a form both backends parse;
# the unique indexes agent_queue_entry and process_handles_run are the guards.
_ENQUEUE = sql_text(
    "INSERT INTO agent_queue (parent_run_id, step, goal, depth) "
    "VALUES (:parent_run_id, :step, :goal, :depth) "
    "ON CONFLICT (parent_run_id, step, goal) DO NOTHING"
)
_HANDLE_STARTED = sql_text(
    "INSERT INTO process_handles (run_id, handle, step, line, state) "
    "VALUES (:run_id, :handle, :step, :line, 'running') ON CONFLICT (run_id, handle) DO NOTHING"
)
ROOT_ADDRESS = "root"
"""The name every tree's root answers to."""


def message_row(*r: Any) -> AgentMessage:
    return AgentMessage(int(r[0]), int(r[1]), int(r[2]), r[3], int(r[4]), r[5], r[6], r[7])


def handle_row(*r: Any) -> ProcessHandle:
    pids = [int(p) for p in (r[3] or "").split(",") if p.strip().isdigit()]
    return ProcessHandle(int(r[0]), int(r[1]), r[2], pids, r[4], r[5], r[6])


def _handle_columns() -> tuple[Any, ...]:
    h = m.ProcessHandle
    return (h.handle, h.step, h.line, h.pids, h.state, h.code, h.reason)


def i32(value: int | None, name: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or not -(2**31) <= value < 2**31:
        from ..errors import InvalidValueError

        raise InvalidValueError(f"{name} must be an i32, got {value!r}")
    return value


class MailboxMixin(OlderStoreMixin):
    """Upstream's `agents.rs`: the mailbox, the queue, addresses and process handles."""

    @writes
    def send_message(
        self, from_run_id: int, to_run_id: int, from_name: str, step: int, body: str
    ) -> int:
        """Leave a message for another agent of the tree; return its id."""
        a = m.AgentMessage
        statement = (
            insert(a)
            .values(
                from_run_id=from_run_id,
                to_run_id=to_run_id,
                from_name=text(from_name, "from_name"),
                step=u32(step, "step"),
                body=text(body, "body"),
            )
            .returning(a.id)
        )
        with self._write() as conn:
            return int(conn.execute(statement).scalar_one())

    @writes
    def read_messages(self, to_run_id: int, from_name: str | None = None) -> list[AgentMessage]:
        """Take a run's unread messages (only `from_name`'s when given), oldest first, and
        mark them read at one stamp: one `UPDATE … RETURNING` of the unread ones, so a message
        is delivered once (a concurrent reader finds it read), and the statement's parameters
        are the same few however many messages wait."""
        a = m.AgentMessage
        unread = [a.to_run_id == to_run_id, a.read_at.is_(None)]
        if from_name is not None:
            unread.append(a.from_name == from_name)
        with self._write() as conn:
            now = conn.execute(select(literal_now(self))).scalar()
            taken = update(a).where(*unread).values(read_at=now)
            columns = (a.id, a.from_run_id, a.to_run_id, a.from_name, a.step, a.body, a.sent_at)
            rows = conn.execute(taken.returning(*columns, a.read_at)).all()
        return sorted((message_row(*r) for r in rows), key=lambda message: message.id)

    @reads
    def messages_for(self, to_run_id: int) -> list[AgentMessage]:
        """Every message sent to a run, read or not, oldest first (reading nothing)."""
        if self._lacks("agent_messages"):
            return []
        a = m.AgentMessage
        statement = (
            select(
                a.id, a.from_run_id, a.to_run_id, a.from_name, a.step, a.body, a.sent_at, a.read_at
            )
            .where(a.to_run_id == to_run_id)
            .order_by(a.id)
        )
        return self._rows(statement, message_row)

    @writes
    def enqueue_agent(self, parent_run_id: int, step: int, goal: str, depth: int) -> bool:
        """Queue a child to spawn later; False when that (parent, step, goal) is queued already."""
        params = {
            "parent_run_id": parent_run_id,
            "step": u32(step, "step"),
            "goal": text(goal, "goal"),
            "depth": u32(depth, "depth"),
        }
        with self._write() as conn:
            return bool(conn.execute(_ENQUEUE, params).rowcount == 1)

    @writes
    def dequeue_agent(self, parent_run_id: int, step: int, goal: str) -> bool:
        """Take a queued child off the queue; True for exactly the one caller that removed it."""
        q = m.AgentQueueEntry
        with self._write() as conn:
            removed = conn.execute(
                delete(q).where(q.parent_run_id == parent_run_id, q.step == step, q.goal == goal)
            ).rowcount
        return bool(removed == 1)

    @reads
    def queued_agents(self, root: int) -> list[tuple[int, str]]:
        """Every child queued anywhere in the tree, as (depth, goal), in queue order."""
        if self._lacks("agent_queue"):
            return []
        q = m.table_of(m.AgentQueueEntry)
        tree = tree_ids(root)
        statement = (
            select(q.c.depth, q.c.goal).join(tree, q.c.parent_run_id == tree.c.id).order_by(q.c.id)
        )
        return self._rows(statement, lambda depth, goal: (int(depth), goal))

    @reads
    def tree_addresses(self, root: int) -> list[tuple[str, int]]:
        """The names agents of the tree answer to, as (name, run id), sorted: every named
        child, and `root` for the root."""
        if self._lacks("spawns", "as_name"):  # no child had a name before 0.60
            return [(ROOT_ADDRESS, root)]
        s = m.table_of(m.Spawn)
        tree = tree_ids(root)
        statement = (
            select(s.c.as_name, s.c.child_run_id)
            .join(tree, s.c.child_run_id == tree.c.id)
            .where(s.c.as_name != "")
        )
        found = set(self._rows(statement, lambda name, run: (name, int(run))))
        found.add((ROOT_ADDRESS, root))
        return sorted(found)

    # --- process handles -------------------------------------------------------------------

    @writes
    def record_handle_started(self, run_id: int, step: int, handle: int, line: str) -> None:
        """Record a background process started as `handle` of the run; a repeat is ignored."""
        params = {
            "run_id": run_id,
            "handle": u64(handle, "handle"),
            "step": u32(step, "step"),
            "line": text(line, "line"),
        }
        with self._write() as conn:
            conn.execute(_HANDLE_STARTED, params)

    @writes
    def record_handle_pids(self, run_id: int, handle: int, pids: list[int]) -> None:
        """Record the process ids behind a handle (comma-joined, as upstream)."""
        h = m.ProcessHandle
        joined = ",".join(str(u32(p, "pid")) for p in pids)
        with self._write() as conn:
            conn.execute(
                update(h).where(h.run_id == run_id, h.handle == handle).values(pids=joined)
            )

    @writes
    def record_handle_ended(
        self, run_id: int, handle: int, state: str, code: int | None, reason: str | None
    ) -> None:
        """Record how a running handle ended; a handle that already ended keeps its ending."""
        h = m.ProcessHandle
        with self._write() as conn:
            conn.execute(
                update(h)
                .where(h.run_id == run_id, h.handle == handle, h.state == "running")
                .values(
                    state=text(state, "state"),
                    code=i32(code, "code"),
                    reason=opt_text(reason, "reason"),
                    ended_at=literal_now(self),
                )
            )

    @writes
    def record_handle_output(self, run_id: int, step: int, handle: int, chunk: str) -> None:
        """Append a chunk of a handle's output; an empty chunk writes nothing."""
        if not text(chunk, "chunk"):
            return
        self._append(
            m.HandleOutput,
            run_id=run_id,
            handle=u64(handle, "handle"),
            step=u32(step, "step"),
            chunk=chunk,
        )

    @reads
    def process_handles(self, run_id: int) -> list[ProcessHandle]:
        """Every process handle of a run, in start order."""
        if self._lacks("process_handles"):
            return []
        h = m.ProcessHandle
        statement = select(*_handle_columns()).where(h.run_id == run_id).order_by(h.id)
        return self._rows(statement, handle_row)

    @writes
    def orphan_live_handles(self, run_id: int, reason: str) -> list[ProcessHandle]:
        """Mark the run's still-running handles orphaned (their process died with a crashed
        run) and return them as they now read, in one transaction."""
        h = m.ProcessHandle
        with self._write() as conn:
            rows = [
                handle_row(*r)
                for r in conn.execute(
                    select(*_handle_columns())
                    .where(h.run_id == run_id, h.state == "running")
                    .order_by(h.id)
                )
            ]
            conn.execute(
                update(h)
                .where(h.run_id == run_id, h.state == "running")
                .values(state="orphaned", reason=text(reason, "reason"), ended_at=literal_now(self))
            )
        return [
            ProcessHandle(p.handle, p.step, p.line, p.pids, "orphaned", p.code, reason)
            for p in rows
        ]

    @reads
    def handle_output(self, run_id: int, handle: int) -> str:
        """Everything a handle's process printed, as read, concatenated."""
        if self._lacks("handle_output"):
            return ""
        o = m.HandleOutput
        statement = select(o.chunk).where(o.run_id == run_id, o.handle == handle).order_by(o.id)
        return "".join(self._rows(statement, str))


def literal_now(store: StoreBase) -> Any:
    """The database clock in upstream's stamp format, as a SQL expression."""
    return literal_column(store._backend.now())
