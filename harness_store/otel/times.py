"""When a run's rows happened, from the store's stamps: stamps as nanoseconds, and a clock
that places each step (steps have no stamp of their own)."""

from __future__ import annotations

from bisect import bisect_right
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..store.export_reads import RunRows, SpanStep


@lru_cache(maxsize=4096)
def stamp_ns(stamp: str | None) -> int | None:
    """A store stamp (`2026-08-01T14:06:59.511Z` or `2026-08-01 14:06:59`, UTC) in nanoseconds
    since the epoch; None for no stamp or one that is not a time."""
    if not stamp:
        return None
    try:
        moment = datetime.fromisoformat(stamp.strip().replace(" ", "T", 1))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1_000_000) * 1000


class StepClock:
    """When each step of a run happened, as near as the store's stamps tell: steps have no
    stamp, so a step is placed at the latest stamp recorded at or before it (its provider
    calls' and tool attempts'), else at the run's start."""

    def __init__(self, rows: RunRows) -> None:
        marks: dict[int, int] = {}
        ends: list[int] = []
        for call in rows.provider_calls:
            at = stamp_ns(call.at)
            if at is not None:
                marks[call.step] = max(marks.get(call.step, at), at)
                ends.append(at)
        for attempt in rows.tool_attempts:
            started = stamp_ns(attempt.started_at)
            if started is not None:
                marks.setdefault(attempt.step, started)
                ends.append(stamp_ns(attempt.completed_at) or started)
        for server in rows.server_tool_calls:
            ran = stamp_ns(server.ran_at)
            if ran is not None:
                ends.append(ran)
        run = rows.run
        start = stamp_ns(run.started_at)
        finished = stamp_ns(run.finished_at)
        if start is None and finished is not None and run.duration_ms is not None:
            start = finished - run.duration_ms * 1_000_000
        if start is None:
            start = min([*marks.values(), *ends], default=0)
        end = finished
        if end is None and run.duration_ms is not None:
            end = start + run.duration_ms * 1_000_000
        self.run_start = start
        self.run_end = max([end or start, *ends])
        latest = start
        self._marked: list[int] = []
        self._times: list[int] = []
        for marked, at in sorted(marks.items()):
            latest = max(latest, at)
            self._marked.append(marked)
            self._times.append(latest)
        self._step_rows: dict[tuple[int, str], tuple[SpanStep, str]] = {}
        self._attempt_steps = {(a.step, a.tool) for a in rows.tool_attempts}

    def at(self, step: int) -> int:
        """The time of `step`: the latest mark at or before it, else the run's start."""
        index = bisect_right(self._marked, step) - 1
        return self._times[index] if index >= 0 else self.run_start

    def keep_step(self, step: SpanStep, name: str, arguments: str) -> None:
        """Remember a step's call (with its arguments) that a tool attempt of the same step and
        tool records."""
        if (step.step, name) in self._attempt_steps:
            self._step_rows[(step.step, name)] = (step, arguments)

    def step_row(self, step: int, tool: str) -> tuple[SpanStep, str] | None:
        """The step row and the call's arguments kept for a tool attempt, if any."""
        return self._step_rows.get((step, tool))
