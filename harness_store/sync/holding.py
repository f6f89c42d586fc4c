"""Which runs a pass holds back (`quarantine`): the values the destination cannot hold found
before anything is written, the runs held before looked at again, released once they can be
sent."""

from __future__ import annotations

from typing import Any

from ..errors import UnsendableValueError
from ..stamps import Stamp
from . import quarantine
from .finding import known
from .origin_state import STATE_MARK, OriginState
from .report import HeldRun
from .rules import RULES, RUNS


class Holding(OriginState):
    """Finding the runs one origin's pass holds back."""

    def _look_at_held_texts(self) -> None:
        """Note the texts whose bytes are not UTF-8 in the runs held back before (their rows
        only: few), so that such a run stays held without a read failing on it first."""
        before = self.held_before = quarantine.load(self.central, self.origin_id)
        if before:
            for table, (run, row, column, said) in quarantine.not_utf8(self.src, self.have, before):
                if run is not None:
                    self.unreadable.setdefault(run, (table, row, column, said))

    def _hold_values(self, read: dict[str, tuple[Any, Any, int]], *, whole: bool) -> None:
        """Find, before anything is written, every value among the rows this pass sends that
        the destination cannot hold as it is (`transfer.values.refusals`, the check copy
        makes): in the rows of every state table that changed, or all of them when the
        origin is sent `whole`, and the rows of every append table above its mark. The run
        of such a row is held back (`quarantine`), with what waits for it; a value in no
        run's row refuses the source (`UnsendableValueError`). Runs held back before are
        looked at again: one whose rows the centre can now hold is released, sent whole by
        this pass."""
        found: dict[int, tuple[str, str | None, str | None, str]] = {}
        for rule in RULES:
            if rule.table not in self.have:
                continue
            above: int | None = None
            runs = None
            if rule.kind == "state":
                if (
                    not whole
                    and self.hwm_loaded.get(STATE_MARK + rule.table) == read[rule.table][2]
                ):
                    continue
                runs = self.suspects.get(rule.table) if rule.table in self.partial else None
            else:
                above = 0 if whole else self.hwm.get(rule.table, 0)
                if self.tops.get(rule.table, 0) <= above:
                    continue
            for run, row, column, said in quarantine.find(
                self.src, self.have, self.backend, rule, above=above, runs=runs
            ):
                if run is None:
                    raise UnsendableValueError(f"{rule.table}.{column} of the row {row} {said}")
                found.setdefault(run, (rule.table, row, column, said))
        for run, entry in self.unreadable.items():  # texts a read of the source failed on
            found.setdefault(run, entry)
        before = self.held_before
        if before is None:
            before = {} if self.fresh else quarantine.load(self.central, self.origin_id)
        if before:
            for rule, _ in quarantine.run_rules(self.have):
                for run, row, column, said in quarantine.find(
                    self.src, self.have, self.backend, rule, runs=before
                ):
                    if run is not None:
                        found.setdefault(run, (rule.table, row, column, said))
        family = (
            quarantine.waiting(
                self.src,
                self.have,
                {r: f[3] for r, f in found.items()},
                set() if whole else known(self.ids[RUNS]),
            )
            if found
            else {}
        )
        held = [
            HeldRun(run, *found[run], new=run not in before)
            if run in found
            else HeldRun(run, RUNS, None, None, family[run], new=run not in before)
            for run in sorted(family)
        ]
        self.held = set(family)
        self.held_sessions = quarantine.held_sessions(self.src, self.have, self.held)
        self.released = sorted(set(before) - self.held)
        self.reload_runs.update(self.released)
        self.quarantined = held
        if held:
            quarantine.save(self.src, self.dst, self.have, self.origin_id, held, Stamp.now().text)
