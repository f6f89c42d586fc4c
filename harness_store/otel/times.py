"""When a run's rows happened, from the store's stamps: stamps as nanoseconds, and a clock
that places each step (steps have no stamp of their own)."""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

from ..stamps import Stamp

if TYPE_CHECKING:
    from ..store.trace_export import RunRows, SpanProviderCall, SpanStep


@lru_cache(maxsize=4096)
def stamp_ns(stamp: str | None) -> int | None:
    """A store stamp (`2026-08-01T14:06:59.511Z` or `2026-08-01 14:06:59`, UTC) in nanoseconds
    since the epoch; None for no stamp or one that is not a time."""
    found = Stamp.read(stamp)
    return None if found is None else found.ns


class StepClock:
    """When each step of a run happened, as near as the store's stamps tell: steps have no
    stamp, so a step is placed at the latest stamp recorded at or before it (its provider
    calls' and tool attempts'), else at the run's start.

    The provider calls are taken a window of steps at a time (`take`), in rising step order,
    as an export streams a long run: a step's time depends only on the calls of steps up to
    it. What is kept is one number pair per step that has a stamp, never the calls."""

    def __init__(self, rows: RunRows, earliest_call: Callable[[], int | None]) -> None:
        self._attempt_marks: dict[int, int] = {}
        self._end: int | None = None
        stamps: list[int] = []  # of the rows other than provider calls, for an unstamped run
        for attempt in rows.tool_attempts:
            started = stamp_ns(attempt.started_at)
            if started is not None:
                self._attempt_marks.setdefault(attempt.step, started)
                stamps.append(stamp_ns(attempt.completed_at) or started)
        for server in rows.server_tool_calls:
            ran = stamp_ns(server.ran_at)
            if ran is not None:
                stamps.append(ran)
        for at in stamps:
            self.later(at)
        run = rows.run
        start = stamp_ns(run.started_at)
        finished = stamp_ns(run.finished_at)
        if start is None and finished is not None and run.duration_ms is not None:
            start = finished - run.duration_ms * 1_000_000
        if start is None:  # no stamp of the run's own (older stores): its earliest row's
            call = earliest_call()
            firsts = [*([call] if call is not None else []), *self._attempt_marks.values(), *stamps]
            start = min(firsts, default=0)
        end = finished
        if end is None and run.duration_ms is not None:
            end = start + run.duration_ms * 1_000_000
        self.run_start = start
        self._run_end = end or start
        self._latest = start
        self._high: int | None = None
        self._marked = array("q")
        self._times = array("q")
        self._attempts_ahead = sorted(self._attempt_marks.items())
        """The tool attempts' marks by step, taken in order with the windows (`_next`)."""
        self._next = 0
        self._step_rows: dict[tuple[int, str], tuple[SpanStep, str]] = {}
        self._attempt_steps = {(a.step, a.tool) for a in rows.tool_attempts}

    def later(self, at: int | None) -> None:
        """A row stamped `at` belongs to the run: the run ends no earlier (every provider
        call's stamp is given here as it is read)."""
        if at is not None and (self._end is None or at > self._end):
            self._end = at

    @property
    def run_end(self) -> int:
        """When the run ended: its own stamp, or its last row's if later (known once every
        window was taken)."""
        return max(self._run_end, self._end if self._end is not None else self._run_end)

    def take(self, calls: Iterable[SpanProviderCall], through: int | None) -> None:
        """The provider calls of the steps after the last window's up to `through` (None: all
        the rest), with the tool attempts of those steps, as marks."""
        marks: dict[int, int] = {}
        for call in calls:
            at = stamp_ns(call.at)
            if at is not None:
                marks[call.step] = max(marks.get(call.step, at), at)
        low = self._high
        ahead = self._attempts_ahead
        while self._next < len(ahead) and (through is None or ahead[self._next][0] <= through):
            step, started = ahead[self._next]
            self._next += 1
            if low is None or step > low:
                marks.setdefault(step, started)
        for marked, at in sorted(marks.items()):
            self._latest = max(self._latest, at)
            self._marked.append(marked)
            self._times.append(self._latest)
        if through is not None:
            self._high = through if low is None else max(low, through)

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
